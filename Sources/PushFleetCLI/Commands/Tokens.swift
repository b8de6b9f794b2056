import ArgumentParser
import Foundation
import PushFleetCore
import PushFleetPostgres
import PushFleetServices

/// The token registry.
struct Tokens: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Manage the token registry.", subcommands: [Import.self])

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Bulk-load tokens into the registry; a token registered again becomes active again."
        )

        @Argument(help: "Token file, or '-' for standard input.")
        var file: String

        @Option(help: "The app's bundle ID.")
        var topic: String

        @Option(help: "production or sandbox.", transform: APNsEnvironment.option("--environment"))
        var environment: APNsEnvironment

        @OptionGroup var state: StateOptions

        func run() async throws {
            let reader = try TokenFileReader(path: self.file)
            let imported = try await self.state.withStore(logger: makeLogger("pushfleet.tokens")) { store in
                var total = 0
                let now = Date()
                var progress = FileProgress(reader)
                while true {
                    let batch = try reader.read(upTo: 10_000)
                    progress?.advance(by: batch.count, ended: batch.isEmpty)
                    if batch.isEmpty { return total }
                    total += try await store.importTokens(batch, topic: self.topic, environment: self.environment, registeredAt: now)
                }
            }
            print("imported \(imported) tokens for \(self.topic) (\(self.environment))")
        }
    }
}
