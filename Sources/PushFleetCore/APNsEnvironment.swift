/// Which of Apple's two APNs environments a token belongs to and a notification goes to.
///
/// A token is issued for one environment: a development build of an app gets `sandbox` tokens, an
/// App Store or TestFlight build `production` ones, and each gateway rejects the other's tokens
/// (`BadDeviceToken`). Campaigns, devices and the queues workers serve are therefore kept apart by
/// environment as well as by topic. The raw value is what the command line, the API, Redis keys
/// and Postgres rows spell.
public enum APNsEnvironment: String, Choice {
    case production
    case sandbox

    /// The HTTP/2 provider API's host for this environment.
    public var http2Host: String {
        switch self {
        case .production: "api.push.apple.com"
        case .sandbox: "api.sandbox.push.apple.com"
        }
    }

    /// The retired binary provider API's host for this environment (port 2195).
    public var binaryHost: String {
        switch self {
        case .production: "gateway.push.apple.com"
        case .sandbox: "gateway.sandbox.push.apple.com"
        }
    }
}

/// Which APNs provider API a sender speaks: HTTP/2 (the one Apple runs) or the binary protocol
/// Apple retired on 31 March 2021 (kept for gateways that still speak it, and the simulator).
public enum DeliveryProtocol: String, Choice {
    case http2
    case binary

    /// The protocol's name in messages: `HTTP/2`, `binary`.
    public var name: String {
        switch self {
        case .http2: "HTTP/2"
        case .binary: "binary"
        }
    }
}

/// One of a few values spelled by their raw value wherever they are read or written: the command
/// line, the API, Redis keys, Postgres rows.
public protocol Choice: RawRepresentable<String>, Sendable, Hashable, CaseIterable, CustomStringConvertible {}

extension Choice {
    /// The value `text` spells, or an error that says what the values are, prefixed by `name`
    /// (the option or field it came from: `--environment`, `"environment"`).
    public init(parsing text: String, name: String) throws(InvalidChoice) {
        guard let value = Self(rawValue: text) else { throw InvalidChoice(name: name, value: text, choices: Self.allCases.map(\.rawValue)) }
        self = value
    }

    public var description: String { self.rawValue }
}

/// A value that is not one of the few an option or field takes: `--protocol is http2 or binary`.
public struct InvalidChoice: Error, Hashable, Sendable, CustomStringConvertible {
    /// The option or field: `--environment`, `"environment"`.
    public var name: String
    /// What was given.
    public var value: String
    /// What it may be.
    public var choices: [String]

    public init(name: String, value: String, choices: [String]) {
        self.name = name
        self.value = value
        self.choices = choices
    }

    public var description: String {
        let listed = self.choices.count <= 2 ? self.choices.joined(separator: " or ") : self.choices.dropLast().joined(separator: ", ") + " or " + self.choices.last!
        return "\(self.name) is \(listed)"
    }
}
