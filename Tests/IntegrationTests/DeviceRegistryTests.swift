import Foundation
import PushFleetCore
import PushFleetPostgres
import Testing

/// Users, their devices and the groups they share, on the real Postgres: who a doorbell's ring goes
/// to, one owner per phone, and APNs' verdicts against late registrations.
@Suite struct DeviceRegistryTests {
    /// Ids no other test uses.
    private static func ids(_ label: String, _ count: Int) -> [String] {
        let run = String(UInt64.random(in: 0...UInt64.max), radix: 36)
        return (0..<count).map { "\(label)-\($0)-\(run)" }
    }

    private static func register(
        _ token: DeviceToken, _ topic: String, to user: String, at date: Date, platform: String? = "ios",
        on store: CampaignStore
    ) async throws -> RegisteredDevice {
        try await store.registerDevice(
            DeviceRegistration(token: token, topic: topic, environment: .production, user: user, platform: platform, registeredAt: date)
        )
    }

    @Test func aGroupReachesEveryActiveDeviceOfEveryMemberAndNoOther() async throws {
        try await PostgresFixture.withStore { store in
            let topic = PostgresFixture.topic("doorbell")
            let other = PostgresFixture.topic("other-app")
            let users = Self.ids("user", 4)
            let doors = Self.ids("door", 2)
            let (group, neighbour) = (doors[0], doors[1])
            let tokens = PostgresFixture.tokens(9)
            let now = Date()
            // Three sharing users with two phones each; a fourth user outside the group.
            for (index, token) in tokens.prefix(8).enumerated() {
                #expect(try await Self.register(token, topic, to: users[index / 2], at: now, on: store) == RegisteredDevice(status: .active, owner: users[index / 2]))
            }
            // A member's device of another app does not ring for this one.
            _ = try await Self.register(tokens[8], other, to: users[0], at: now, on: store)
            try await store.setGroupMembers(group, users: Array(users.prefix(3)) + [users[0]])
            try await store.setGroupMembers(neighbour, users: [users[3]])

            #expect(try await store.groupMembers(group) == Array(users.prefix(3)).sorted())
            let members = try await store.activeTokens(of: .group(group), topic: topic, environment: .production)
            #expect(members == PostgresFixture.sorted(Array(tokens.prefix(6))))
            #expect(try await store.activeTokens(of: .user(users[1]), topic: topic, environment: .production) == PostgresFixture.sorted(Array(tokens[2..<4])))
            #expect(try await store.activeTokens(of: .group(group), topic: other, environment: .production) == [tokens[8]])
            #expect(try await store.activeTokens(of: .group(group), topic: topic, environment: .sandbox) == [])
            #expect(try await store.activeTokens(of: .group(Self.ids("nobody", 1)[0]), topic: topic, environment: .production) == [])

            // Members are set exactly: the second user leaves, the fourth joins.
            try await store.setGroupMembers(group, users: [users[2], users[0], users[3]])
            #expect(try await store.groupMembers(group) == [users[0], users[2], users[3]].sorted())
            let after = try await store.activeTokens(of: .group(group), topic: topic, environment: .production)
            #expect(after == PostgresFixture.sorted([tokens[0], tokens[1], tokens[4], tokens[5], tokens[6], tokens[7]]))
            try await store.setGroupMembers(group, users: [])
            #expect(try await store.activeTokens(of: .group(group), topic: topic, environment: .production) == [])

            // A removed device gets nothing more.
            #expect(try await store.removeDevice(tokens[6], topic: topic, environment: .production))
            #expect(try await store.removeDevice(tokens[6], topic: topic, environment: .production) == false)
            #expect(try await store.activeTokens(of: .user(users[3]), topic: topic, environment: .production) == [tokens[7]])
            #expect(try await store.tokenStatus(tokens[6], topic: topic, environment: .production) == nil)
        }
    }

    @Test func registeringAPhoneAgainMovesItToItsNewOwnerUnlessTheRegistrationIsOlder() async throws {
        try await PostgresFixture.withStore { store in
            let topic = PostgresFixture.topic("owner")
            let users = Self.ids("owner", 2)
            let token = PostgresFixture.tokens(1)[0]
            let t0 = Date() - 86_400
            _ = try await Self.register(token, topic, to: users[0], at: t0, on: store)

            let moved = try await Self.register(token, topic, to: users[1], at: t0 + 60, on: store)
            #expect(moved == RegisteredDevice(status: .active, owner: users[1], previousOwner: users[0]))
            #expect(try await store.activeTokens(of: .user(users[0]), topic: topic, environment: .production) == [])
            #expect(try await store.activeTokens(of: .user(users[1]), topic: topic, environment: .production) == [token])

            // A registration older than the one held arrives late: the phone stays where it is.
            let late = try await Self.register(token, topic, to: users[0], at: t0 + 30, on: store)
            #expect(late == RegisteredDevice(status: .active, owner: users[1]))
            // The same owner again: nothing moved.
            #expect(try await Self.register(token, topic, to: users[1], at: t0 + 90, on: store) == RegisteredDevice(status: .active, owner: users[1]))

            // An import raises the token's registered_at, not its ownership: a registration later than
            // the owner's still takes the phone.
            #expect(try await store.importTokens([token], topic: topic, environment: .production, registeredAt: t0 + 600) == 1)
            #expect(try await Self.register(token, topic, to: users[0], at: t0 + 120, on: store).owner == users[0])

            // A token imported without an owner (a campaign audience) goes to its first registration,
            // however old.
            let imported = PostgresFixture.tokens(1)[0]
            #expect(try await store.importTokens([imported], topic: topic, environment: .production, registeredAt: t0 + 600) == 1)
            #expect(try await Self.register(imported, topic, to: users[0], at: t0, on: store) == RegisteredDevice(status: .active, owner: users[0]))
        }
    }

    /// APNs' `410 Unregistered` carries the time it learnt the token was gone: a registration after
    /// it revives the device, one before it (a retried request, a stale backup) does not.
    @Test func aDeviceAPNsUnregisteredIsRevivedOnlyByALaterRegistration() async throws {
        try await PostgresFixture.withStore { store in
            let topic = PostgresFixture.topic("revive")
            let user = Self.ids("revive", 1)[0]
            let token = PostgresFixture.tokens(1)[0]
            let t0 = Date() - 86_400
            _ = try await Self.register(token, topic, to: user, at: t0, on: store)
            try await store.markTokens([(token, .unregistered, .unregistered, t0 + 100)], topic: topic, environment: .production)
            #expect(try await store.activeTokens(of: .user(user), topic: topic, environment: .production) == [])

            let before = try await Self.register(token, topic, to: user, at: t0 + 50, on: store)
            #expect(before.status == .unregistered)
            #expect(try await store.tokenStatus(token, topic: topic, environment: .production) == .unregistered)
            #expect(try await store.activeTokens(of: .user(user), topic: topic, environment: .production) == [])

            let after = try await Self.register(token, topic, to: user, at: t0 + 150, on: store)
            #expect(after == RegisteredDevice(status: .active, owner: user))
            #expect(try await store.activeTokens(of: .user(user), topic: topic, environment: .production) == [token])
        }
    }

    /// Concurrent settings of one group's members end with one of them, never a mix.
    @Test func concurrentMemberSettingsOfOneGroupLeaveOneOfThem() async throws {
        try await PostgresFixture.withStore { store in
            let users = Self.ids("turn", 8)
            let group = Self.ids("turns", 1)[0]
            try await store.setGroupMembers(group, users: [users[0]])
            for _ in 0..<5 {
                try await withThrowingTaskGroup(of: Void.self) { tasks in
                    for user in users { tasks.addTask { try await store.setGroupMembers(group, users: [user]) } }
                    try await tasks.waitForAll()
                }
                let members = try await store.groupMembers(group)
                #expect(members.count == 1, "\(members)")
            }
        }
    }

    /// A device's locale and time zone, as a launch in parts reads them: kept when a later
    /// registration says nothing of them, replaced when it does, refused when malformed.
    @Test func aDevicesLocaleAndTimeZoneAreKeptForLaunchesInParts() async throws {
        try await PostgresFixture.withStore { store in
            let topic = PostgresFixture.topic("locales")
            let user = Self.ids("user", 1)[0]
            let tokens = PostgresFixture.tokens(2).sorted { $0.hexString < $1.hexString }
            let now = Date()
            func register(_ token: DeviceToken, at date: Date, locale: String?, zone: String?) async throws {
                _ = try await store.registerDevice(DeviceRegistration(
                    token: token, topic: topic, environment: .production, user: user, registeredAt: date, locale: locale, timeZone: zone
                ))
            }
            try await register(tokens[0], at: now.addingTimeInterval(-60), locale: "fr_FR", zone: "Europe/Paris")
            try await register(tokens[1], at: now.addingTimeInterval(-60), locale: nil, zone: nil)
            // Later registrations: one says nothing of them, one moves the phone to Tokyo.
            try await register(tokens[0], at: now.addingTimeInterval(-30), locale: nil, zone: nil)
            try await register(tokens[1], at: now, locale: "ja", zone: "Asia/Tokyo")
            var recipients = try await store.activeRecipients(topic: topic, environment: .production, after: nil, limit: 10)
            #expect(recipients.map(\.token) == tokens)
            #expect(recipients.map(\.locale) == ["fr_FR", "ja"])
            #expect(recipients.map(\.timeZone) == ["Europe/Paris", "Asia/Tokyo"])
            // An older registration changes nothing of them.
            try await register(tokens[1], at: now.addingTimeInterval(-600), locale: "de", zone: "Europe/Berlin")
            recipients = try await store.activeRecipients(topic: topic, environment: .production, after: tokens[0], limit: 10)
            #expect(recipients.map(\.locale) == ["ja"])
            #expect(recipients.map(\.timeZone) == ["Asia/Tokyo"])
            for (locale, zone, says) in [("fr FR", nil, "locale 'fr FR'"), (nil, "Mars/Olympus", "time zone 'Mars/Olympus'")] as [(String?, String?, String)] {
                await #expect {
                    try await register(tokens[0], at: now, locale: locale, zone: zone)
                } throws: { error in "\(error)".contains(says) }
            }
        }
    }

    @Test func badIdsAndPlatformsAreRefusedAndWriteNothing() async throws {
        try await PostgresFixture.withStore { store in
            let topic = PostgresFixture.topic("refused")
            let token = PostgresFixture.tokens(1)[0]
            let user = Self.ids("refused", 1)[0]
            let group = Self.ids("refused-group", 1)[0]
            let long = String(repeating: "é", count: 101)  // 202 bytes
            let refusals: [(user: String, platform: String, at: Date, says: String)] = [
                ("", "ios", Date(), "user id is 0 bytes"), (long, "ios", Date(), "user id is 202 bytes"),
                (user, "android", Date(), "platform 'android'"), (user, "", Date(), "platform ''"),
                (user, "ios", Date() + 3_600, "in the future"),
            ]
            for refusal in refusals {
                do {
                    _ = try await Self.register(token, topic, to: refusal.user, at: refusal.at, platform: refusal.platform, on: store)
                    Issue.record("registered with \(refusal)")
                } catch let error as PostgresStoreError {
                    #expect(error.code == .invalidInput)
                    #expect(error.message.contains(refusal.says), "\(error.message)")
                }
            }
            #expect(try await store.tokenStatus(token, topic: topic, environment: .production) == nil)

            do {
                try await store.setGroupMembers(group, users: [user, long])
                Issue.record("a 202-byte user id was taken")
            } catch let error as PostgresStoreError {
                #expect(error.code == .invalidInput)
                #expect(error.message.contains("202 bytes"), "\(error.message)")
            }
            await #expect(throws: PostgresStoreError.self) { try await store.setGroupMembers("", users: [user]) }
            #expect(try await store.groupMembers(group) == [])
            // Nothing half-written stands in the way of the valid call.
            #expect(try await Self.register(token, topic, to: user, at: Date(), platform: nil, on: store) == RegisteredDevice(status: .active, owner: user))
        }
    }
}
