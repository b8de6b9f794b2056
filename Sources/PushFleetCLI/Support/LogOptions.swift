import ArgumentParser
import Foundation
import Logging
import PushFleetCore
import Synchronization

/// `--log-level` and `--log-format` (`PUSHFLEET_LOG_LEVEL`, `PUSHFLEET_LOG_FORMAT`) for the
/// long-running commands. Logs go to standard error: text for people, JSON lines for a collector.
struct LogOptions: ParsableArguments {
    @Option(help: "trace, debug, info, notice, warning, error or critical (default: info).")
    var logLevel: String?

    @Option(help: "text, or json: one JSON object per line with time, level, label, message and metadata.")
    var logFormat: String = "text"

    private static let level = Mutex<Logger.Level?>(nil)
    /// The level `--log-level` chose, once ``bootstrap()`` ran.
    static var chosenLevel: Logger.Level? { Self.level.withLock { $0 } }

    /// `warn` is taken for `warning`, as many tools write it.
    private var level: Logger.Level? { self.logLevel.flatMap { Logger.Level(rawValue: $0 == "warn" ? "warning" : $0) } }

    func validate() throws {
        if let level = self.logLevel, self.level == nil {
            throw ValidationError("--log-level is trace, debug, info, notice, warning, error or critical, not \(level)")
        }
        guard ["text", "json"].contains(self.logFormat) else { throw ValidationError("--log-format is text or json, not \(self.logFormat)") }
    }

    /// Sets up logging for the process; call it first in `run()`.
    func bootstrap() {
        let chosen = self.level
        Self.level.withLock { $0 = chosen }
        if self.logFormat == "json" {
            LoggingSystem.bootstrap { JSONLogHandler(label: $0) }
        } else {
            LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
        }
    }
}

/// One JSON object per line on standard error:
/// `{"time":"2026-11-24T19:00:00.123Z","level":"info","label":"pushfleet.worker","message":"…","metadata":{…}}`.
struct JSONLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    private static let output = Mutex(())

    init(label: String) {
        self.label = label
        self.metadataProvider = LoggingSystem.metadataProvider
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var merged = self.metadata
        if let provided = self.metadataProvider?.get() { merged.merge(provided) { $1 } }
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        var fields: [(key: String, value: JSONValue)] = [
            ("time", .string(Date.now.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted)))),
            ("level", .string(event.level.rawValue)), ("label", .string(self.label)), ("message", .string(event.message.description)),
            ("source", .string(event.source)), ("file", .string(event.file)), ("line", .number(String(event.line))),
        ]
        if !merged.isEmpty { fields.append(("metadata", Self.json(.dictionary(merged)))) }
        var line = JSONValue.object(fields).compactUTF8
        line.append(UInt8(ascii: "\n"))
        Self.output.withLock { _ in FileHandle.standardError.write(Data(line)) }
    }

    private static func json(_ value: Logger.Metadata.Value) -> JSONValue {
        switch value {
        case .string(let text): .string(text)
        case .stringConvertible(let convertible): .string(convertible.description)
        case .array(let values): .array(values.map(Self.json))
        case .dictionary(let entries): .object(entries.sorted { $0.key < $1.key }.map { ($0.key, Self.json($0.value)) })
        }
    }
}
