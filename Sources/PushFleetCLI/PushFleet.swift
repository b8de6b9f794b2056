import ArgumentParser

@main
struct PushFleet: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pushfleet",
        abstract: "Send Apple push notifications to very large audiences.",
        subcommands: [Send.self, MockAPNs.self, Demo.self]
    )
}
