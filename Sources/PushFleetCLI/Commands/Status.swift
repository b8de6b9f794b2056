import ArgumentParser
import Foundation
import PushFleetPostgres
import PushFleetServices

/// Shows a campaign's progress.
struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show a campaign's progress: state, counts, rate, ETA.")

    @Argument(help: "The campaign id.")
    var campaignID: String

    @Flag(help: "One JSON object.")
    var json = false

    @Flag(help: "Redraw a progress bar until the campaign ends; then exit 0 if it completed, 2 if it failed, 3 if it was cancelled.")
    var watch = false

    @OptionGroup var state: StateOptions

    func validate() throws {
        guard UUID(uuidString: self.campaignID) != nil else { throw ValidationError("the campaign id must be a UUID, got \"\(self.campaignID)\"") }
    }

    /// How `--watch` ends for a campaign that did not complete.
    static func exitCode(_ state: CampaignState) -> ExitCode? {
        switch state {
        case .failed: ExitCode(2)
        case .cancelled: ExitCode(3)
        default: nil
        }
    }

    func run() async throws {
        let id = UUID(uuidString: self.campaignID)!
        try await self.state.withStore(logger: makeLogger("pushfleet.status")) { store in
            guard var record = try await store.campaign(id) else {
                try await self.splitTest(id, store: store)
                return
            }
            if self.watch {
                let bar = ProgressBar(total: record.total)
                while record.finishedAt == nil && ![.completed, .cancelled, .failed].contains(record.state) {
                    let report = StatusReport(record: record)
                    bar.draw(done: report.settled, detail: "\(record.state.rawValue)  rejected \(record.rejected.values.reduce(0, +))  resent \(record.resent)")
                    try await Task.sleep(for: .milliseconds(500))
                    record = try await store.campaign(id) ?? record
                }
                bar.draw(done: StatusReport(record: record).settled, detail: record.state.rawValue)
                bar.finish()
            }
            let report = StatusReport(record: record)
            print(self.json ? report.json : report.text)
            if self.watch, let code = Self.exitCode(record.state) { throw code }
        }
    }

    /// The status of a launch in parts (`launch --variant`, `--localized`, `--local-time`): its
    /// parts side by side.
    private func splitTest(_ id: UUID, store: CampaignStore) async throws {
        var variants = try await store.variants(of: id)
        guard !variants.isEmpty else { throw CLIError("no campaign \(self.campaignID) (nor a split test or other launch in parts of that id)") }
        var report = SplitReport(id: id, variants: variants)
        if self.watch {
            let bar = ProgressBar(total: report.total)
            while !report.state.isFinal {
                bar.draw(done: report.accepted + report.rejected.values.reduce(0, +), detail: "\(report.state.rawValue)  \(variants.count) parts")
                try await Task.sleep(for: .milliseconds(500))
                variants = try await store.variants(of: id)
                report = SplitReport(id: id, variants: variants)
            }
            bar.draw(done: report.accepted + report.rejected.values.reduce(0, +), detail: report.state.rawValue)
            bar.finish()
        }
        print(self.json ? report.json : report.text)
        if self.watch, let code = Self.exitCode(report.state) { throw code }
    }
}
