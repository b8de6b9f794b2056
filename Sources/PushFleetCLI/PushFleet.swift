import ArgumentParser
import Foundation

struct PushFleet: AsyncParsableCommand {
    /// The release, as `pushfleet --version` prints it.
    static let version = "0.11.0"

    static let configuration = CommandConfiguration(
        commandName: "pushfleet",
        abstract: "Send Apple push notifications to very large audiences.",
        discussion: """
            Every long option of a command can also come from the environment: PUSHFLEET_<OPTION> \
            (--metrics-port as PUSHFLEET_METRICS_PORT), or PUSHFLEET_<OPTION>_FILE naming a file that \
            holds the value. The command line wins.
            """,
        version: Self.version,
        subcommands: [Launch.self, Notify.self, API.self, APIKeys.self, Worker.self, Coordinator.self, Status.self, Campaign.self, Tokens.self, MockAPNs.self, Send.self, Demo.self]
    )

    /// Every subcommand starts here: the parent watch first, then the environment's options,
    /// then parsing and `run()`.
    static func main() async {
        ParentWatch.startIfRequested()
        let arguments: [String]
        do {
            arguments = try EnvironmentArguments.merged(Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment)
        } catch {
            Self.exit(withError: error)
        }
        await Self.main(arguments)
    }
}
