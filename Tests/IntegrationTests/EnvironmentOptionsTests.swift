import Foundation
import PushFleetTestSupport
import Testing

/// `PUSHFLEET_<OPTION>` and `PUSHFLEET_<OPTION>_FILE`, and their mistakes. Each campaign command's
/// options from the environment are used for real in `PipelineMetricsTests`.
@Suite struct EnvironmentOptionsTests {
    @Test func theCommandLineWinsOverTheEnvironment() async throws {
        let result = try await PushFleetProcess.run(
            ["worker", "--topic", "com.example.env", "--metrics-port", "70001"], environment: ["PUSHFLEET_METRICS_PORT": "70000"]
        )
        #expect(result.status != 0)
        #expect(result.error.contains("--metrics-port is 0 to 65535, not 70001"), "\(result.error)")
    }

    @Test func anOptionComesFromItsVariable() async throws {
        let result = try await PushFleetProcess.run(["worker", "--topic", "com.example.env"], environment: ["PUSHFLEET_CONNECTIONS": "65"])
        #expect(result.status != 0)
        #expect(result.error.contains("--connections is between 1 and 64"), "\(result.error)")
    }

    @Test func anUnreadableFileIsNamed() async throws {
        let missing = NSTemporaryDirectory() + "pushfleet-no-such-secret-\(UUID().uuidString)"
        let result = try await PushFleetProcess.run(["status", UUID().uuidString], environment: ["PUSHFLEET_REDIS_FILE": missing])
        #expect(result.status != 0)
        #expect(result.error.contains("PUSHFLEET_REDIS_FILE=\(missing): cannot read the file"), "\(result.error)")
    }

    /// A `_FILE` must hold one value. A key file named there by mistake (its option takes a path)
    /// is refused without a word of what it holds.
    @Test func aFileOfSeveralLinesIsRefusedUnread() async throws {
        let file = NSTemporaryDirectory() + "pushfleet-not-a-value-\(UUID().uuidString)"
        try "-----BEGIN PRIVATE KEY-----\nSECRETSECRET\n-----END PRIVATE KEY-----\n".write(toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let result = try await PushFleetProcess.run(["worker", "--topic", "com.example.env"], environment: ["PUSHFLEET_AUTH_KEY_FILE": file])
        #expect(result.status != 0)
        #expect(result.error.contains("PUSHFLEET_AUTH_KEY_FILE=\(file): the file holds several lines"), "\(result.error)")
        #expect(!result.error.contains("SECRETSECRET") && !result.output.contains("SECRETSECRET"))
    }

    @Test func aFlagTakesTrueOrFalse() async throws {
        let result = try await PushFleetProcess.run(["status", UUID().uuidString], environment: ["PUSHFLEET_JSON": "maybe"])
        #expect(result.status != 0)
        #expect(result.error.contains("PUSHFLEET_JSON=maybe: --json is a flag; give true or false"), "\(result.error)")
    }

    @Test func versionIsPrinted() async throws {
        let result = try await PushFleetProcess.run(["--version"])
        #expect(result.status == 0)
        #expect(result.output.split(separator: ".").count == 3, "\(result.output)")
    }
}
