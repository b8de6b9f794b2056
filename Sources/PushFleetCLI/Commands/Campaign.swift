import ArgumentParser
import Foundation
import PushFleetCore
import PushFleetPostgres
import PushFleetRedis
import PushFleetServices

/// Operator control of a running campaign.
struct Campaign: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List campaigns; pause, resume, cancel, retry or throttle one.",
        subcommands: [List.self, Pause.self, Resume.self, Cancel.self, Retry.self, SetRate.self]
    )

    struct Target: ParsableArguments {
        @Argument(help: "The campaign id.")
        var campaignID: String

        @OptionGroup var state: StateOptions

        func validate() throws {
            guard UUID(uuidString: self.campaignID) != nil else { throw ValidationError("the campaign id must be a UUID, got \"\(self.campaignID)\"") }
        }

        /// Applies `change` to the campaign, or to each variant of the split test, and prints what
        /// became of each (``CampaignControl``). A variant that cannot change is named and left.
        func apply(_ change: CampaignControl.Change) async throws {
            let id = UUID(uuidString: self.campaignID)!
            try await self.state.withState(logger: makeLogger("pushfleet.campaign")) { queue, store in
                do {
                    try await CampaignControl(queue: queue, store: store).apply(change, to: id, spelled: self.campaignID) { result in
                        switch result.outcome {
                        case .failure(let refusal):
                            writeStandardError("\(result.name) \(refusal.description); left as it is\n")
                        case .success(let done):
                            if let error = result.redisError {
                                writeStandardError("warning: \(error); the coordinator applies it once Redis answers\n")
                            }
                            print("\(result.name)\(done)")
                        }
                    }
                } catch let error as CampaignControlError {
                    throw CLIError(error.description)
                }
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The newest campaigns, with their state and counts.")

        @Option(help: "Only campaigns in this state (repeatable): pending, running, paused, completed, cancelled or failed.")
        var state: [String] = []

        @Option(help: "At most this many.")
        var limit: Int = 50

        @Flag(help: "A JSON array of the objects `status --json` prints.")
        var json = false

        @OptionGroup var store: StateOptions

        func validate() throws {
            for state in self.state where CampaignState(rawValue: state) == nil {
                throw ValidationError("--state is pending, running, paused, completed, cancelled or failed, not \(state)")
            }
            guard (1...10_000).contains(self.limit) else { throw ValidationError("--limit is between 1 and 10000") }
        }

        func run() async throws {
            let states = self.state.isEmpty ? CampaignState.allCases : self.state.compactMap(CampaignState.init(rawValue:))
            let records = try await self.store.withStore(logger: makeLogger("pushfleet.campaign")) { store in
                try await store.recentCampaigns(in: states, limit: self.limit)
            }
            let reports = records.map { StatusReport(record: $0) }
            if self.json {
                print(PushFleetJSON.encode(reports))
                return
            }
            let rows = [["CAMPAIGN", "STATE", "TOPIC", "ENV", "TOTAL", "ACCEPTED", "REJECTED", "PENDING", "CREATED"]] + reports.map { report in
                let r = report.record
                return [
                    r.id.uuidString, r.state.rawValue, r.topic, r.environment.rawValue, String(r.total), String(r.accepted),
                    String(r.rejected.values.reduce(0, +)), String(r.pending), r.createdAt.formatted(.iso8601),
                ]
            }
            let widths = (0..<rows[0].count).map { column in rows.map { $0[column].count }.max() ?? 0 }
            for row in rows {
                print(zip(row, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: "  ").trimmingCharacters(in: .whitespaces))
            }
        }
    }

    struct Pause: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop sending within a second; shards are released at their checkpoint.")
        @OptionGroup var target: Target
        func run() async throws { try await self.target.apply(.pause) }
    }

    struct Resume: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Resume a paused campaign where it stopped.")
        @OptionGroup var target: Target
        func run() async throws { try await self.target.apply(.resume) }
    }

    struct Cancel: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop for good; what was not sent is counted as cancelled.")
        @OptionGroup var target: Target
        func run() async throws { try await self.target.apply(.cancel) }
    }

    struct Retry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Put a campaign's dead shards (given up after too many claims) back in the queue; a failed campaign runs again."
        )
        @OptionGroup var target: Target

        func run() async throws {
            let id = UUID(uuidString: self.target.campaignID)!
            try await self.target.state.withState(logger: makeLogger("pushfleet.campaign")) { queue, store in
                let retried: (shards: Int, state: CampaignState)
                do {
                    retried = try await CampaignControl(queue: queue, store: store).retry(id, spelled: self.target.campaignID)
                } catch let error as CampaignControlError {
                    throw CLIError(error.description)
                }
                let shards = retried.shards
                print("campaign \(self.target.campaignID): \(shards) dead shard\(shards == 1 ? "" : "s") back in the queue; \(retried.state.rawValue)")
            }
        }
    }

    struct SetRate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set-rate",
            abstract: "Change how many notifications a second the fleet sends of a campaign, while it runs ('none' lifts the limit)."
        )
        @OptionGroup var target: Target

        @Argument(help: "Notifications per second, fleet-wide, or 'none'.")
        var rate: String

        func validate() throws {
            guard self.rate == "none" || Launcher.rateLimits.contains(Int(self.rate) ?? 0) else {
                throw ValidationError("the rate is a number of notifications a second (1 to 100000000) or 'none', not \"\(self.rate)\"")
            }
        }

        func run() async throws { try await self.target.apply(.setRate(Int(self.rate))) }
    }
}
