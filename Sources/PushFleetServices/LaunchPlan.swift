public import Foundation
public import PushFleetCore

/// One campaign of a launch in parts: what its recipients get, and when.
public struct LaunchPart: Sendable, Hashable {
    /// Its name among the launch's parts: the variant or locale, the UTC offset of its
    /// recipients' zones at their start, or both (`fr.utc+0100`).
    public var name: String
    /// The split test's variant or the locale whose payload it sends (`default` for the fallback);
    /// nil when the launch has one payload.
    public var payloadName: String?
    public var payload: Payload
    /// Its local-time start; nil starts it with the launch.
    public var startsAt: Date?
    /// Its payload's template when the payload has placeholders: the part is a personalized
    /// campaign, each recipient's values packed by the audience's source
    /// (``PlannedTokenSource/batchValues``).
    public var template: PayloadTemplate? { (try? PayloadTemplate(self.payload.bytes)) ?? nil }
}

/// How a launch in parts (split test, localized payloads, local-time delivery, or several of them)
/// shares its audience: each recipient goes to one ``LaunchPart``, by its token (the split test's
/// variant), its locale (the payload) and its time zone (the start). Parts are made as recipients
/// need them, in order of first need.
public struct LaunchPlan: Sendable {
    /// What decides a recipient's payload.
    public enum Payloads: Sendable {
        /// The launch's one payload.
        case one(Payload)
        /// A split test: the variants' names and payloads, and how recipients are split between them.
        case variants(VariantSplit, names: [String], payloads: [Payload])
        /// A payload per locale, and the fallback for every other recipient.
        case localized(LocaleChooser, payloads: [Payload], fallback: Payload)

        /// Every payload a recipient may get.
        public var all: [Payload] {
            switch self {
            case .one(let payload): [payload]
            case .variants(_, _, let payloads): payloads
            case .localized(_, let payloads, let fallback): payloads + [fallback]
            }
        }
    }

    public let payloads: Payloads
    /// When a recipient gets it: nil for everyone at once (or at the launch's `--at`).
    public let localTime: LocalTimePlanner?
    /// The zone of a recipient whose audience line names none.
    public let defaultZone: TimeZone?
    /// The parts made so far, in order of first need.
    public private(set) var parts: [LaunchPart] = []

    /// A part's payload, and the UTC offset of its zones at their start (in seconds; nil without
    /// local time). Parts go by offset rather than by start so that their names, and so their
    /// campaigns' ids, stay the same when the same launch is run again later.
    private struct Key: Hashable {
        var payload: Int
        var offset: Int?
    }
    private var partIndex: [Key: Int] = [:]
    /// Each zone seen, and its start with the zone's offset then (nil: no such zone).
    private var starts: [String: (start: Date, offset: Int)?] = [:]
    /// The start of each offset's part.
    private var offsetStarts: [Int: Date] = [:]
    /// Each locale seen, and its payload's index (an audience has few locales, each many times).
    private var choices: [String: Int] = [:]

    public init(payloads: Payloads, localTime: LocalTimePlanner? = nil, defaultZone: TimeZone? = nil) {
        self.payloads = payloads
        self.localTime = localTime
        self.defaultZone = defaultZone
    }

    /// The name of the part of the recipients whose locale has no payload of its own: no locale
    /// may take it.
    public static let fallbackName = "default"

    /// The names of the payloads every one of which must reach someone (a split test's variants).
    public var requiredPayloadNames: [String] {
        if case .variants(_, let names, _) = self.payloads { return names }
        return []
    }

    /// The index in ``parts`` of the part `token` goes to.
    /// - Parameters:
    ///   - locale: the recipient's locale, if the audience gives one.
    ///   - zone: the recipient's time zone (an IANA name such as `Europe/Paris`), if it gives one.
    /// - Throws: ``LaunchPlanError`` for a zone that does not exist, or none where one is needed.
    public mutating func part(of token: DeviceToken, locale: String?, zone: String?) throws(LaunchPlanError) -> Int {
        let payload: Int
        switch self.payloads {
        case .one: payload = 0
        case .variants(let split, _, _): payload = split.variant(of: token)
        case .localized(let chooser, let payloads, _):
            if let locale, let known = self.choices[locale] {
                payload = known
            } else {
                payload = chooser.choose(locale) ?? payloads.count
                if let locale { self.choices[locale] = payload }
            }
        }
        var offset: Int? = nil
        if let localTime = self.localTime {
            let start = try self.start(zone: zone, localTime)
            offset = start.offset
            self.offsetStarts[start.offset] = start.start
        }
        let key = Key(payload: payload, offset: offset)
        if let index = self.partIndex[key] { return index }
        self.parts.append(self.makePart(key))
        self.partIndex[key] = self.parts.count - 1
        return self.parts.count - 1
    }

    /// The parts of a batch of recipients, as ``part(of:locale:zone:)`` gives them; a refusal
    /// becomes the error `failure` makes of it and the recipient's index in the batch (which
    /// names its place: file and line, body index, device).
    public mutating func parts(
        of batch: [(token: DeviceToken, locale: String?, zone: String?)], failure: (Int, LaunchPlanError) -> any Error
    ) throws -> [(token: DeviceToken, part: Int)] {
        var planned: [(token: DeviceToken, part: Int)] = []
        planned.reserveCapacity(batch.count)
        for (index, recipient) in batch.enumerated() {
            do {
                planned.append((recipient.token, try self.part(of: recipient.token, locale: recipient.locale, zone: recipient.zone)))
            } catch {
                throw failure(index, error)
            }
        }
        return planned
    }

    private mutating func start(zone name: String?, _ localTime: LocalTimePlanner) throws(LaunchPlanError) -> (start: Date, offset: Int) {
        let zone: TimeZone
        if let name {
            if let known = self.starts[name] {
                guard let known else { throw LaunchPlanError("unknown time zone \"\(name)\"; zones are IANA names such as Europe/Paris") }
                return known
            }
            guard let named = TimeZone(identifier: name) else {
                self.starts[name] = .some(nil)
                throw LaunchPlanError("unknown time zone \"\(name)\"; zones are IANA names such as Europe/Paris")
            }
            zone = named
        } else {
            guard let fallback = self.defaultZone else {
                throw LaunchPlanError("no time zone for this recipient; give one in its audience line, or --default-zone for those without")
            }
            zone = fallback
        }
        guard let start = localTime.start(in: zone) else {
            throw LaunchPlanError("no \(localTime.time) in time zone \(zone.identifier) within a day of the launch")
        }
        let planned = (start, zone.secondsFromGMT(for: start))
        if let name { self.starts[name] = planned }
        return planned
    }

    private func makePart(_ key: Key) -> LaunchPart {
        let payloadName: String?
        let payload: Payload
        switch self.payloads {
        case .one(let one):
            (payloadName, payload) = (nil, one)
        case .variants(_, let names, let payloads):
            (payloadName, payload) = (names[key.payload], payloads[key.payload])
        case .localized(let chooser, let payloads, let fallback):
            (payloadName, payload) = key.payload < payloads.count ? (chooser.locales[key.payload], payloads[key.payload]) : (Self.fallbackName, fallback)
        }
        let name = [payloadName, key.offset.map(LocalTimePlanner.name(offset:))].compactMap { $0 }.joined(separator: ".")
        return LaunchPart(name: name, payloadName: payloadName, payload: payload, startsAt: key.offset.flatMap { self.offsetStarts[$0] })
    }
}

/// Why a recipient has no part; the audience's reader prefixes its file and line.
public struct LaunchPlanError: Error, Hashable, Sendable, CustomStringConvertible {
    public let description: String

    public init(_ description: String) { self.description = description }
}

/// An audience whose every recipient has its part of a ``LaunchPlan``.
public protocol PlannedTokenSource {
    /// The next recipients and the index of each one's part in ``plan``; empty at the end.
    /// - Throws: an error naming the place of bad input (file and line).
    mutating func next(upTo maximum: Int) async throws -> [(token: DeviceToken, part: Int)]
    /// The plan, whose parts are complete once ``next(upTo:)`` has returned empty.
    var plan: LaunchPlan { get }
    /// For the recipients of the last batch, in order: the packed values of those whose part is
    /// personalized (``LaunchPart/template``), empty for the others; nil when no part is.
    var batchValues: RecipientValueList? { get }
}

/// A plain audience (tokens without fields) planned by its tokens alone.
public struct PlainPlannedTokenSource<Inner: TokenSource>: PlannedTokenSource {
    /// Tokens without fields: no values.
    public var batchValues: RecipientValueList? { nil }
    var inner: Inner
    public private(set) var plan: LaunchPlan

    public init(_ inner: Inner, plan: LaunchPlan) {
        self.inner = inner
        self.plan = plan
    }

    public mutating func next(upTo maximum: Int) async throws -> [(token: DeviceToken, part: Int)] {
        let batch = try await self.inner.next(upTo: maximum)
        return try self.plan.parts(of: batch.map { ($0, nil, nil) }) { _, error in LaunchError(message: "\(error)") }
    }
}
