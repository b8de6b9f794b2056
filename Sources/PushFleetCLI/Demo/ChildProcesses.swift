import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `pushfleet` child processes of the demo: started from this executable, stopped with SIGTERM.
final class ChildProcesses {
    private var processes: [(Process, ErrorTail)] = []

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
        self.processes.append((process, ErrorTail(errors)))
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
        // Standard error is read beside standard output: a child blocked writing one while this
        // waits on the other would wait forever.
        let errorTail = ErrorTail(errors)
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw CLIError("pushfleet \(arguments.first ?? "") failed: \(errorTail.text())")
        }
        return String(decoding: data, as: UTF8.self)
    }

    var allRunning: Bool { self.processes.allSatisfy { $0.0.isRunning } }

    /// The end of what the processes that ended wrote to standard error.
    var errors: String {
        self.processes.filter { !$0.0.isRunning }.map { $0.1.text() }.joined(separator: "\n")
    }

    func terminateAll() {
        for (process, _) in self.processes where process.isRunning { kill(process.processIdentifier, SIGTERM) }
        for (process, _) in self.processes { process.waitUntilExit() }
        self.processes.removeAll()
    }
}

/// The last ``limit`` bytes a child wrote to standard error, read as they come on a thread of
/// their own: a child that wrote more than a pipe holds (64 KiB on Linux) and was never read would
/// block in its next write, and stop working with it.
final class ErrorTail: Sendable {
    static let limit = 16 * 1024

    private let pipe: Pipe
    private let bytes = Mutex<[UInt8]>([])
    private let ended = DispatchSemaphore(value: 0)

    init(_ pipe: Pipe) {
        self.pipe = pipe
        let descriptor = pipe.fileHandleForReading.fileDescriptor
        let thread = Thread { [self] in
            var chunk = [UInt8](repeating: 0, count: 4_096)
            while true {
                let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                self.bytes.withLock { tail in
                    tail.append(contentsOf: chunk[0..<count])
                    if tail.count > Self.limit { tail.removeFirst(tail.count - Self.limit) }
                }
            }
            self.ended.signal()
        }
        thread.start()
    }

    /// What was read; for a child that ended, after waiting up to a second for the rest of it.
    func text() -> String {
        if self.ended.wait(timeout: .now() + 1) == .success { self.ended.signal() }
        return String(decoding: self.bytes.withLock { $0 }, as: UTF8.self)
    }
}
