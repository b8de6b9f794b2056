public import Foundation

/// When a `launch --local-time HH:MM` campaign reaches a recipient: the first time, at or after the
/// launch, that the clock of the recipient's time zone shows HH:MM. So a "9 am" campaign launched
/// at any hour rolls across the world within the next 24 hours, each zone at its own nine o'clock.
public struct LocalTimePlanner: Sendable {
    public let hour: Int
    public let minute: Int
    /// `HH:MM`, as given.
    public let time: String
    /// The launch: no start is earlier.
    public let now: Date

    /// - Returns: nil unless `time` is `HH:MM`, 00:00 to 23:59.
    public init?(_ time: String, now: Date) {
        let parts = time.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isASCII) }),
            let hour = Int(parts[0]), let minute = Int(parts[1]), (0...23).contains(hour), (0...59).contains(minute)
        else { return nil }
        self.hour = hour
        self.minute = minute
        self.time = time
        self.now = now
    }

    /// The first moment at or after ``now`` at which `zone`'s clock shows the time. Where that
    /// local time does not exist on a day (a daylight-saving gap), the first moment after the gap.
    /// Nil only if the calendar finds none (it always does for a real zone).
    public func start(in zone: TimeZone) -> Date? {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let wanted = DateComponents(hour: self.hour, minute: self.minute, second: 0)
        // `nextDate(after:)` is strictly after: a launch on the minute itself starts at once.
        let after = self.now.addingTimeInterval(-0.001)
        return calendar.nextDate(after: after, matching: wanted, matchingPolicy: .nextTime)
    }

    /// A local-time part's name among a launch's parts: its zones' UTC offset at their start, such
    /// as `utc+0100`, `utc-0330` or `utc+0000`.
    public static func name(offset seconds: Int) -> String {
        let minutes = abs(seconds) / 60
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "utc\(seconds < 0 ? "-" : "+")\(two(minutes / 60))\(two(minutes % 60))"
    }
}

/// Picks a recipient's payload by its locale (`launch --localized fr=@fr.json`), as BCP 47 lookup
/// does (RFC 4647 §3.4): the locale itself, then less and less of it (`zh-Hant-TW`, `zh-Hant`,
/// `zh`), compared without regard to case and with `_` read as `-`; none of them, or no locale,
/// gets the fallback payload.
public struct LocaleChooser: Sendable, Hashable {
    /// The locales that have a payload, as given.
    public let locales: [String]
    private let index: [String: Int]

    /// - Precondition: no two locales are the same once normalized.
    public init(locales: [String]) {
        self.locales = locales
        var index: [String: Int] = [:]
        for (position, locale) in locales.enumerated() { index[Self.normalized(locale)] = position }
        precondition(index.count == locales.count, "two locales are the same")
        self.index = index
    }

    /// The position in ``locales`` of the payload for `locale`, or nil for the fallback.
    public func choose(_ locale: String?) -> Int? {
        guard let locale else { return nil }
        var key = Self.normalized(locale)
        while !key.isEmpty {
            if let found = self.index[key] { return found }
            guard let dash = key.lastIndex(of: "-") else { return nil }
            key = String(key[..<dash])
            // A single-letter subtag (an extension's key) goes with what follows it.
            if key.count >= 2, key[key.index(key.endIndex, offsetBy: -2)] == "-" { key.removeLast(2) }
        }
        return nil
    }

    /// Lowercase, `_` as `-`, no surrounding space.
    public static func normalized(_ locale: String) -> String {
        String(locale.trimmingCharacters(in: .whitespaces).lowercased().map { $0 == "_" ? "-" : $0 })
    }
}
