import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `pushfleet` child processes of the demo: started from this executable, stopped with SIGTERM.
final class ChildProcesses {
    private var processes: [(Process, Pipe)] = []

    private static var executable: URL {
        URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0])
    }

    /// Starts `pushfleet arguments…` in the background; its standard error is kept for errors.
    func start(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = Self.executable
        process.arguments = arguments
        // The demo gives its children their options; options exported for the demo itself (a
        // metrics port every child would try to bind) are not theirs.
        var environment = ProcessInfo.processInfo.environment.filter { key, _ in
            !key.hasPrefix(EnvironmentArguments.prefix) || ["PUSHFLEET_REDIS_URL", "PUSHFLEET_POSTGRES_URL", "PUSHFLEET_LOG_LEVEL", "PUSHFLEET_EXIT_WITH_PARENT"].contains(key)
        }
        environment["PUSHFLEET_LOG_LEVEL"] = environment["PUSHFLEET_LOG_LEVEL"] ?? "error"
        process.environment = environment
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        self.processes.append((process, errors))
    }

    /// Runs `pushfleet arguments…` to the end and returns its standard output.
    /// - Throws: ``CLIError`` with its standard error if it fails.
    func run(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = Self.executable
        process.arguments = arguments
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        let errorData = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw CLIError("pushfleet \(arguments.first ?? "") failed: \(String(decoding: errorData, as: UTF8.self))")
        }
        return String(decoding: data, as: UTF8.self)
    }

    var allRunning: Bool { self.processes.allSatisfy { $0.0.isRunning } }

    /// What the processes that ended wrote to standard error.
    var errors: String {
        self.processes.filter { !$0.0.isRunning }.map { String(decoding: $0.1.fileHandleForReading.availableData, as: UTF8.self) }.joined(separator: "\n")
    }

    func terminateAll() {
        for (process, _) in self.processes where process.isRunning { kill(process.processIdentifier, SIGTERM) }
        for (process, _) in self.processes { process.waitUntilExit() }
        self.processes.removeAll()
    }
}
