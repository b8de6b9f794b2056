import Foundation
import PushFleetCore
import PushFleetServices
import Testing

/// How a launch in parts places its recipients: the local-time planner (each zone's next HH:MM),
/// the locale chooser (BCP 47 lookup with a fallback), and the plan that combines them.
@Suite struct LaunchPlanTests {
    /// 2026-11-26 06:30 UTC.
    static let now = Date(timeIntervalSince1970: 1_795_674_600)

    static func zone(_ name: String) throws -> TimeZone { try #require(TimeZone(identifier: name)) }

    static func utc(_ text: String) throws -> Date {
        try #require(try? Date(text, strategy: .iso8601))
    }

    static func token(_ index: Int) throws -> DeviceToken {
        try DeviceToken(bytes: (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index &* 7 &+ (index >> 8)) })
    }

    @Test func eachZoneStartsAtItsNextNineOClock() throws {
        let planner = try #require(LocalTimePlanner("09:00", now: Self.now))
        // 06:30 UTC: 09:00 is still to come today in London (06:30 there, UTC+0 in November) and
        // Paris (07:30, UTC+1) ...
        #expect(planner.start(in: try Self.zone("Europe/London")) == (try Self.utc("2026-11-26T09:00:00Z")))
        #expect(planner.start(in: try Self.zone("Europe/Paris")) == (try Self.utc("2026-11-26T08:00:00Z")))
        // ... and has passed in Tokyo (15:30): tomorrow's.
        #expect(planner.start(in: try Self.zone("Asia/Tokyo")) == (try Self.utc("2026-11-27T00:00:00Z")))
        // New York (01:30 there, UTC-5) and a half-hour zone, Kolkata (12:00 there, UTC+5:30).
        #expect(planner.start(in: try Self.zone("America/New_York")) == (try Self.utc("2026-11-26T14:00:00Z")))
        #expect(planner.start(in: try Self.zone("Asia/Kolkata")) == (try Self.utc("2026-11-27T03:30:00Z")))
        // Every start lies within the next 24 hours, so the campaign rolls over one day.
        for name in ["Pacific/Kiritimati", "Pacific/Pago_Pago", "Australia/Adelaide", "America/St_Johns", "UTC"] {
            let start = try #require(planner.start(in: try Self.zone(name)))
            #expect(start >= Self.now && start < Self.now.addingTimeInterval(86_400), "\(name): \(start)")
        }
    }

    @Test func aLaunchOnTheMinuteStartsAtOnceAndDaylightSavingIsFollowed() throws {
        let onTheMinute = try #require(LocalTimePlanner("06:30", now: Self.now))
        #expect(onTheMinute.start(in: try Self.zone("UTC")) == Self.now)
        // Paris in summer is UTC+2: 09:00 there is 07:00 UTC.
        let summer = try #require(LocalTimePlanner("09:00", now: try Self.utc("2026-07-01T00:00:00Z")))
        #expect(summer.start(in: try Self.zone("Europe/Paris")) == (try Self.utc("2026-07-01T07:00:00Z")))
        // 02:30 does not exist in Paris on 2026-03-29 (clocks go from 02:00 to 03:00): the first moment after.
        let gap = try #require(LocalTimePlanner("02:30", now: try Self.utc("2026-03-29T00:30:00Z")))
        let start = try #require(gap.start(in: try Self.zone("Europe/Paris")))
        let (earliest, latest) = (try Self.utc("2026-03-29T01:00:00Z"), try Self.utc("2026-03-29T01:30:00Z"))
        #expect(start >= earliest && start <= latest, "\(start)")
    }

    @Test func badTimesAreRefused() {
        for text in ["9:00", "24:00", "09:60", "0900", "09:00:00", "", "aa:bb", "٠٩:٠٠"] {
            #expect(LocalTimePlanner(text, now: Self.now) == nil, "\(text)")
        }
        #expect(LocalTimePlanner("23:59", now: Self.now) != nil)
    }

    @Test func aLocalTimePartIsNamedByItsUTCOffset() {
        #expect(LocalTimePlanner.name(offset: 3_600) == "utc+0100")
        #expect(LocalTimePlanner.name(offset: 0) == "utc+0000")
        #expect(LocalTimePlanner.name(offset: 19_800) == "utc+0530")
        #expect(LocalTimePlanner.name(offset: -12_600) == "utc-0330")
        #expect(LocalTimePlanner.name(offset: 50_400) == "utc+1400")
    }

    @Test func aLocaleGetsItsOwnPayloadThenItsLanguagesThenTheFallback() {
        let chooser = LocaleChooser(locales: ["fr", "pt-BR", "zh-Hant", "de_DE"])
        #expect(chooser.choose("fr") == 0)
        #expect(chooser.choose("fr_CA") == 0)
        #expect(chooser.choose("FR-ca") == 0)
        #expect(chooser.choose("pt-BR") == 1)
        #expect(chooser.choose("pt_br") == 1)
        #expect(chooser.choose("pt") == nil, "pt-BR is not every pt")
        #expect(chooser.choose("pt-PT") == nil)
        #expect(chooser.choose("zh-Hant-TW") == 2)
        #expect(chooser.choose("zh-Hans") == nil)
        #expect(chooser.choose("de-DE") == 3)
        #expect(chooser.choose("de") == nil)
        #expect(chooser.choose("fr-x-private") == 0)
        #expect(chooser.choose("en") == nil)
        #expect(chooser.choose("") == nil)
        #expect(chooser.choose(nil) == nil)
    }

    @Test func thePlanMakesAPartPerLocaleAndStart() throws {
        let en = try Payload(jsonText: Array(#"{"aps":{"alert":"Hi"}}"#.utf8), format: .http2(pushType: "alert"))
        let fr = try Payload(jsonText: Array(#"{"aps":{"alert":"Salut"}}"#.utf8), format: .http2(pushType: "alert"))
        var plan = LaunchPlan(
            payloads: .localized(LocaleChooser(locales: ["fr"]), payloads: [fr], fallback: en),
            localTime: LocalTimePlanner("09:00", now: Self.now), defaultZone: try Self.zone("UTC")
        )
        let parts = try [
            plan.part(of: Self.token(0), locale: "fr_FR", zone: "Europe/Paris"),
            plan.part(of: Self.token(1), locale: "en_GB", zone: "Europe/London"),
            plan.part(of: Self.token(2), locale: "fr", zone: "Europe/Brussels"),  // Paris' offset: Paris' part
            plan.part(of: Self.token(3), locale: nil, zone: nil),  // the default zone, UTC: London's start
            plan.part(of: Self.token(4), locale: "fr_CA", zone: "America/Montreal"),
        ]
        #expect(parts == [0, 1, 0, 1, 2])
        #expect(plan.parts.map(\.name) == ["fr.utc+0100", "default.utc+0000", "fr.utc-0500"])
        #expect(plan.parts.map(\.startsAt) == [try Self.utc("2026-11-26T08:00:00Z"), try Self.utc("2026-11-26T09:00:00Z"), try Self.utc("2026-11-26T14:00:00Z")])
        #expect(plan.parts.map(\.payload) == [fr, en, fr])
        #expect(plan.parts.map(\.payloadName) == ["fr", "default", "fr"])
        #expect(plan.parts[2].startsAt == (try Self.utc("2026-11-26T14:00:00Z")))
    }

    @Test func aRecipientWithoutAZoneOrWithAnUnknownOneIsRefused() throws {
        let payload = try Payload(jsonText: Array(#"{"aps":{"alert":"Hi"}}"#.utf8), format: .http2(pushType: "alert"))
        var plan = LaunchPlan(payloads: .one(payload), localTime: LocalTimePlanner("09:00", now: Self.now))
        #expect(throws: LaunchPlanError("no time zone for this recipient; give one in its audience line, or --default-zone for those without")) {
            try plan.part(of: Self.token(0), locale: nil, zone: nil)
        }
        #expect(throws: LaunchPlanError(#"unknown time zone "Mars/Olympus"; zones are IANA names such as Europe/Paris"#)) {
            try plan.part(of: Self.token(0), locale: nil, zone: "Mars/Olympus")
        }
        #expect(try plan.part(of: Self.token(0), locale: nil, zone: "Asia/Tokyo") == 0)
        #expect(plan.parts.map(\.name) == ["utc+0900"])
        // Without local time, every recipient of one payload is one part, whatever its zone.
        var plain = LaunchPlan(payloads: .one(payload))
        #expect(try plain.part(of: Self.token(1), locale: "fr", zone: "Mars/Olympus") == 0)
        #expect(plain.parts.map(\.name) == [""])
    }
}
