import ArgumentParser
import Foundation
import PushFleetCore
import PushFleetPostgres
import PushFleetServices

/// Sends one notification now, through the doorbell lane.
struct Notify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send one notification now to a user's devices, a group's, or some tokens, and print its id.",
        discussion: """
            The devices of --user or --group are the registry's active ones for the topic and \
            environment, read when the command runs. Every worker of the topic serves notifications \
            before campaign work, over a connection it keeps open. Sending again with the same \
            --notification-id sends nothing more. With --wait, prints each device's outcome once \
            the notification is finished (or --timeout passes, exit 5) and exits 0 if all were \
            accepted, 4 if not.
            """
    )

    @OptionGroup var notification: NotificationOptions

    @Option(help: "Every active device of this user.")
    var user: String?

    @Option(help: "Every active device of every user sharing this group.")
    var group: String?

    @Option(help: "A device token in hex; repeat for more.")
    var token: [String] = []

    @Option(help: "Notification id (UUID); sending the same id twice sends once.")
    var notificationId: String?

    @Flag(help: "Wait for every device's outcome and print them.")
    var wait = false

    @Option(help: "With --wait: give up after this many seconds (exit 5).")
    var timeout: Int = 30

    @Flag(help: "Print JSON instead of text.")
    var json = false

    @OptionGroup var state: StateOptions
    @OptionGroup var log: LogOptions

    func validate() throws {
        let audiences = [self.user != nil, self.group != nil, !self.token.isEmpty].filter { $0 }.count
        guard audiences == 1 else { throw ValidationError("Give one of --user, --group or --token.") }
        guard self.notification.payload != nil else { throw ValidationError("give --payload JSON or --payload @FILE") }
        guard self.timeout > 0 else { throw ValidationError("--timeout is a positive number of seconds") }
        if let id = self.notificationId, UUID(uuidString: id) == nil { throw ValidationError("--notification-id must be a UUID, got \"\(id)\"") }
    }

    func run() async throws {
        self.log.bootstrap()
        let n = self.notification
        let payload = try n.loadPayload()
        let audience: Notifier.Audience
        if let user = self.user {
            audience = .user(user)
        } else if let group = self.group {
            audience = .group(group)
        } else {
            audience = .tokens(try self.token.enumerated().map { offset, hex in
                do {
                    return try DeviceToken(hex: hex)
                } catch {
                    throw CLIError("--token #\(offset + 1): \(error)")
                }
            })
        }
        let request = Notifier.Request(
            id: self.notificationId.flatMap(UUID.init(uuidString:)), definition: n.definition(payload: payload), audience: audience,
            requiredTokenSize: n.requiredTokenSize
        )
        let logger = makeLogger("pushfleet.notify")
        let (result, report) = try await self.state.withState(logger: logger) { queue, store in
            let result = try await Notifier(queue: queue, store: store).notify(request)
            guard self.wait else { return (result, nil as NotificationReport?) }
            let deadline = ContinuousClock.now + .seconds(self.timeout)
            while true {
                let report = try await store.notificationReport(result.id)
                // Finished, not only without pending devices: the coordinator completes it in the
                // round that folds its last outcome, just after writing them.
                if let report, report.record.state.isFinal { return (result, report) }
                if ContinuousClock.now >= deadline { return (result, report) }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        let id = result.id.uuidString.lowercased()
        if !result.created { writeStandardError("notification \(id) exists already; nothing was sent again\n") }
        guard let report else {
            print(self.json ? PushFleetJSON.encode(Notified(id: id, devices: result.devices, created: result.created)) : id)
            return
        }
        if self.json {
            print(NotificationJSON.render(report))
        } else {
            print(id)
            for device in report.devices {
                let owner = device.user.map { " user=\($0)" } ?? ""
                print("\(device.token.hexString) \(device.status.rawValue)\(device.reason.map { " \($0)" } ?? "")\(owner)")
            }
        }
        if !report.record.state.isFinal { throw ExitCode(5) }
        if report.devices.contains(where: { $0.status != .accepted }) { throw ExitCode(4) }
    }
}

/// `notify --json` without `--wait`: the notification's id, the devices it goes to, and whether it
/// was created now.
private struct Notified: Encodable {
    let id: String
    let devices: Int
    let created: Bool
}
