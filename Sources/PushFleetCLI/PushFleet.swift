import ArgumentParser

@main
struct PushFleet: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushfleet",
        abstract: "Send Apple push notifications to very large audiences.",
        subcommands: [Launch.self, Worker.self, Coordinator.self, Status.self, Campaign.self, Tokens.self, MockAPNs.self, Send.self, Demo.self]
    )

    /// Every subcommand starts here: the parent watch first, then parsing and `run()`.
    static func main() async {
        ParentWatch.startIfRequested()
        await Self.main(nil)
    }
}
