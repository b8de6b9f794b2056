import ArgumentParser
import PushFleetCore

// `--environment` and `--protocol` are parsed into their enums where they are read, by
// `@Option(transform:)`, so that a wrong value fails the command with the values it may take
// (`--protocol is http2 or binary`) and nothing past the command line sees a string. (A
// transformed option's help shows no default by itself: each help text states it.)

extension APNsEnvironment {
    /// `--environment`'s transform.
    static func option(_ text: String) throws -> Self {
        try Self(parsing: text, name: "--environment")
    }
}

extension DeliveryProtocol {
    /// `--protocol`'s transform.
    static func option(_ text: String) throws -> Self {
        try Self(parsing: text, name: "--protocol")
    }
}
