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

    @Flag(help: "Redraw a progress bar until the campaign ends.")
    var watch = false

    @OptionGroup var state: StateOptions

    func validate() throws {
        guard UUID(uuidString: self.campaignID) != nil else { throw ValidationError("the campaign id must be a UUID, got \"\(self.campaignID)\"") }
    }

    func run() async throws {
        let id = UUID(uuidString: self.campaignID)!
        try await self.state.withStore(logger: makeLogger("pushfleet.status")) { store in
            guard var record = try await store.campaign(id) else { throw CLIError("no campaign \(self.campaignID)") }
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
        }
    }
}
