import ArgumentParser

@main
struct PushFleet: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushfleet",
        abstract: "Send Apple push notifications to very large audiences.",
        subcommands: [Launch.self, Worker.self, Coordinator.self, Status.self, Campaign.self, Tokens.self, MockAPNs.self, Send.self, Demo.self]
    )
}
