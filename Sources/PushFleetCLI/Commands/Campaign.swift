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

        /// The campaigns the id names: the campaign, or a split test's variants.
        func campaigns(_ store: CampaignStore) async throws -> [CampaignRecord] {
            let id = UUID(uuidString: self.campaignID)!
            if let record = try await store.campaign(id) { return [record] }
            let variants = try await store.variants(of: id)
            guard !variants.isEmpty else { throw CLIError("no campaign \(self.campaignID) (nor a split test of that id)") }
            return variants
        }

        /// Changes the campaign, or each variant of the split test: `postgres` changes Postgres,
        /// or refuses with the reason; then `redis` tells Redis (the coordinator tells it again
        /// every round if Redis does not answer). A split test's variants that cannot change are
        /// left as they are and named; it fails only when none could.
        func changeEach(
            whenNone none: String,
            postgres: (CampaignRecord, _ all: [CampaignRecord], CampaignStore) async throws -> Result<String, CLIError>,
            redis: (CampaignRecord, _ all: [CampaignRecord], CampaignQueue) async throws -> Void
        ) async throws {
            try await self.state.withState(logger: makeLogger("pushfleet.campaign")) { queue, store in
                let records = try await self.campaigns(store)
                var changed = 0
                for record in records {
                    let name = record.variant.map { "variant \($0) (campaign \(record.id.uuidString.lowercased()))" } ?? "campaign \(self.campaignID)"
                    switch try await postgres(record, records, store) {
                    case .failure(let refusal):
                        if record.variant == nil { throw CLIError("\(name) \(refusal.description)") }
                        writeStandardError("\(name) \(refusal.description); left as it is\n")
                    case .success(let done):
                        changed += 1
                        do {
                            try await redis(record, records, queue)
                        } catch {
                            FileHandle.standardError.write(Data("warning: \(error); the coordinator applies it once Redis answers\n".utf8))
                        }
                        print("\(name)\(done)")
                    }
                }
                if changed == 0 { throw CLIError("no variant of split test \(self.campaignID) \(none)") }
            }
        }

        /// Moves the campaign, or each variant of the split test, to `to` in Postgres (from one of
        /// `from`) and Redis.
        func change(to postgresState: CampaignState, from allowed: [CampaignState], queueStatus: CampaignQueueStatus) async throws {
            try await self.changeEach(whenNone: "could become \(postgresState.rawValue)") { record, _, store in
                try await store.setState(record.id, to: postgresState, from: allowed)
                    ? .success(" \(postgresState.rawValue)")
                    : .failure(CLIError("is \(record.state.rawValue); it cannot become \(postgresState.rawValue)"))
            } redis: { record, _, queue in
                try await queue.setStatus(campaign: record.id, queueStatus)
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
                print("[" + reports.map(\.json).joined(separator: ",") + "]")
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
        func run() async throws { try await self.target.change(to: .paused, from: [.running], queueStatus: .paused) }
    }

    struct Resume: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Resume a paused campaign where it stopped.")
        @OptionGroup var target: Target
        func run() async throws { try await self.target.change(to: .running, from: [.paused], queueStatus: .running) }
    }

    struct Cancel: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop for good; what was not sent is counted as cancelled.")
        @OptionGroup var target: Target
        // Cancelling again is allowed: it tells Redis once more.
        func run() async throws {
            try await self.target.change(to: .cancelled, from: [.running, .paused, .pending, .scheduled, .failed, .cancelled], queueStatus: .cancelled)
        }
    }

    struct Retry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Put a campaign's dead shards (given up after too many claims) back in the queue; a failed campaign runs again."
        )
        @OptionGroup var target: Target

        func run() async throws {
            let id = UUID(uuidString: self.target.campaignID)!
            try await self.target.state.withState(logger: makeLogger("pushfleet.campaign")) { queue, store in
                guard let record = try await store.campaign(id) else { throw CLIError("no campaign \(self.target.campaignID)") }
                // Redis first: a retry that stops half way leaves the campaign failed, and can be run again.
                let shards = try await queue.retryDeadShards(campaign: id)
                guard try await store.retry(id) else {
                    throw CLIError("campaign \(self.target.campaignID) is \(record.state.rawValue); only a failed, running or paused campaign can be retried")
                }
                print("campaign \(self.target.campaignID): \(shards) dead shard\(shards == 1 ? "" : "s") back in the queue; \(record.state == .failed ? "running" : record.state.rawValue)")
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

        func run() async throws {
            let rate = Int(self.rate)
            // A launch in parts shares its rate between the parts that start together (all of them
            // but for `--local-time`), as their audiences share their sum.
            func share(_ record: CampaignRecord, of all: [CampaignRecord]) -> Int? {
                let together = all.filter { $0.startsAt == record.startsAt }
                let total = together.reduce(0) { $0 + $1.total }
                return rate.map { together.count == 1 || total == 0 ? $0 : max(1, Int(Double($0) * Double(record.total) / Double(total))) }
            }
            try await self.target.changeEach(whenNone: "has not ended") { record, all, store in
                let limit = share(record, of: all)
                guard record.kind == .campaign, try await store.setRateLimit(record.id, to: limit) else {
                    return .failure(CLIError("is \(record.state.rawValue); only a campaign that has not ended can be throttled"))
                }
                return .success(": \(limit.map { "at most \($0) notifications a second" } ?? "no rate limit")")
            } redis: { record, all, queue in
                try await queue.setRateLimit(campaign: record.id, share(record, of: all))
            }
        }
    }
}
