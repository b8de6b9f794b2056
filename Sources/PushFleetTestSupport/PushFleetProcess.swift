import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A `pushfleet` process started by a test: its output is collected, and signals can be sent to it.
public final class PushFleetProcess: @unchecked Sendable {
    // unchecked Sendable: `process` and the pipes are only read after launch; output and the
    // closing of the pipes go through locks.
    private let process = Process()
    private let output = OutputBuffer()
    private let errors = OutputBuffer()
    /// The read ends of the child's standard output and error; closed once it has ended, so a test
    /// that starts thousands of processes (a status poll every 300 ms) does not run out of file
    /// descriptors, nor make every later `Process.run()` walk thousands of them.
    private let readEnds: [FileHandle]
    private let buffers: [OutputBuffer]
    public let arguments: [String]

    /// The `pushfleet` executable built next to the test bundle.
    public static var executable: String {
        let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for candidate in [directory, directory.deletingLastPathComponent()] {
            let path = candidate.appendingPathComponent("pushfleet").path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return TestCertificates.repositoryRoot() + "/.build/debug/pushfleet"
    }

    /// Starts `pushfleet arguments…` with `environment` added to this process's environment.
    public init(_ arguments: [String], environment: [String: String] = [:]) throws {
        self.arguments = arguments
        self.process.executableURL = URL(fileURLWithPath: Self.executable)
        self.process.arguments = arguments
        var merged = ProcessInfo.processInfo.environment
        merged["PUSHFLEET_LOG_LEVEL"] = merged["PUSHFLEET_LOG_LEVEL"] ?? "warning"
        // The process ends within a second of this one's death (a crashed or killed test run).
        merged["PUSHFLEET_EXIT_WITH_PARENT"] = "1"
        for (key, value) in environment { merged[key] = value }
        self.process.environment = merged
        let out = Pipe()
        let err = Pipe()
        self.process.standardOutput = out
        self.process.standardError = err
        self.process.standardInput = FileHandle.nullDevice
        let output = self.output
        let errors = self.errors
        out.fileHandleForReading.readabilityHandler = { output.append($0.availableData) }
        err.fileHandleForReading.readabilityHandler = { errors.append($0.availableData) }
        self.buffers = [output, errors]
        self.readEnds = [out.fileHandleForReading, err.fileHandleForReading]
        try self.process.run()
    }

    public var pid: Int32 { self.process.processIdentifier }
    public var isRunning: Bool { self.process.isRunning }

    public func signal(_ number: Int32) { kill(self.process.processIdentifier, number) }

    /// Waits for the process to end and returns its exit status (128 + n for signal n).
    @discardableResult
    public func wait() async -> Int32 {
        while self.process.isRunning { try? await Task.sleep(for: .milliseconds(50)) }
        // Let the pipes' last bytes arrive (each pipe reads its end of file once the process has
        // gone), then let go of them. The limit is for a pipe some child of the process still holds.
        let deadline = ContinuousClock.now + .seconds(10)
        while !self.buffers.allSatisfy(\.ended) && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(10)) }
        self.closeReadEnds()
        return self.process.terminationReason == .uncaughtSignal ? 128 + self.process.terminationStatus : self.process.terminationStatus
    }

    public var standardOutput: String { self.output.text }
    public var standardError: String { self.errors.text }

    /// Runs `pushfleet arguments…` to the end: (status, stdout, stderr).
    public static func run(_ arguments: [String], environment: [String: String] = [:]) async throws -> (status: Int32, output: String, error: String) {
        let process = try PushFleetProcess(arguments, environment: environment)
        let status = await process.wait()
        return (status, process.standardOutput, process.standardError)
    }

    private let closed = NSLock()
    private var isClosed = false

    private func closeReadEnds() {
        self.closed.lock()
        defer { self.closed.unlock() }
        guard !self.isClosed else { return }
        self.isClosed = true
        for handle in self.readEnds {
            handle.readabilityHandler = nil
            try? handle.close()
        }
    }

    deinit {
        if self.process.isRunning { kill(self.process.processIdentifier, SIGKILL) }
        self.closeReadEnds()
    }
}

private final class OutputBuffer: @unchecked Sendable {
    // unchecked Sendable: every access holds the lock.
    private let lock = NSLock()
    private var data = Data()

    private var atEnd = false

    /// Appends what the pipe read; an empty read is its end of file.
    func append(_ chunk: Data) {
        self.lock.lock()
        if chunk.isEmpty { self.atEnd = true }
        self.data.append(chunk)
        self.lock.unlock()
    }

    /// Whether the pipe reached its end of file.
    var ended: Bool {
        self.lock.lock()
        defer { self.lock.unlock() }
        return self.atEnd
    }

    var text: String {
        self.lock.lock()
        defer { self.lock.unlock() }
        return String(decoding: self.data, as: UTF8.self)
    }
}
