import ArgumentParser
import PushFleetCore

extension Choice {
    /// The transform of an option that takes one of these (`@Option(transform: APNsEnvironment.option("--environment"))`):
    /// a wrong value fails the command with the values it may take (`--protocol is http2 or binary`),
    /// and nothing past the command line sees a string. A transformed option's help shows no
    /// default by itself: each help text states it.
    static func option(_ name: String) -> @Sendable (String) throws -> Self {
        { text in try Self(parsing: text, name: name) }
    }
}
