public import Logging
public import APNSWire
import Glibc
import NIOCore
import NIOPosix

/// The threads senders run on: a group of event loops, named so that the services above the
/// transport choose one without naming NIO. Each sender is made on one loop of its group.
public struct SenderLoops: Sendable {
    let group: any EventLoopGroup

    /// NIO's shared loops: for a command that sends once, or a poll now and then.
    public static var shared: SenderLoops { SenderLoops(group: MultiThreadedEventLoopGroup.singleton) }

    /// A worker's campaign connections: one loop per core, each thread at a lower CPU priority (a
    /// higher nice value) than the rest of the process.
    ///
    /// A campaign keeps its connections' loops busy for as long as it lasts; everything a doorbell
    /// ring crosses (``lane``'s loop, the lane's Redis client, the API, Redis, Postgres, the
    /// gateway) wakes for moments. With both at the same priority, a ring's every step waits for
    /// the campaign's slices on a saturated host; with the campaign's threads niced, the kernel
    /// runs a waking step first, and the campaign still has every cycle nothing else wants.
    /// Lowering one's own priority needs no privilege. Kept for the process's life, like NIO's
    /// singleton group.
    public static let campaign: SenderLoops = {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)
        for loop in group.makeIterator() {
            // On Linux a thread's nice value is its own: PRIO_PROCESS with id 0 names the calling
            // thread, with the process id the main thread, whose value is the process's.
            try? loop.submit {
                _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, min(19, processNiceValue() + niceIncrement))
            }.wait()
        }
        return SenderLoops(group: group)
    }()

    /// The loop of every notification lane of the process: a thread of its own, so that a ring's
    /// request and answer are never read behind the campaign connections' backlogs, which take a
    /// shared loop tens of milliseconds a turn when a campaign runs at full speed. Kept for the
    /// process's life.
    public static let lane = SenderLoops(group: MultiThreadedEventLoopGroup(numberOfThreads: 1))

    /// How much lower than the process ``campaign``'s loops run (nice +10: about a tenth of the
    /// weight of a thread at the process's priority when both want a core).
    public static let niceIncrement: Int32 = 10

    /// The main thread's nice value: the process's priority, whichever thread asks (threads
    /// inherit their creator's, and the runtime's own threads may differ).
    public static func processNiceValue() -> Int32 {
        getpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(getpid()))
    }

    /// Why ``campaign``'s lower priority may not reach the other services on this host, or nil.
    ///
    /// Linux's automatic session groups (`kernel.sched_autogroup_enabled`, on by default on many
    /// distributions) share CPU time between sessions first, and by nice value only within one.
    /// The campaign threads then still give way to their own process's lane, but not to a
    /// Postgres, Redis or `pushfleet api` started in another session on the same cores: a ring's
    /// steps there wait behind the campaign's slices. Processes in a CPU cgroup of their own (a
    /// systemd service with a CPU weight, a container) are not grouped by session.
    ///
    /// - Parameters:
    ///   - autogroup: The contents of `/proc/sys/kernel/sched_autogroup_enabled`, nil if unreadable.
    ///   - cgroups: The contents of `/proc/self/cgroup`, nil if unreadable.
    public static func priorityCaveat(autogroup: String?, cgroups: String?) -> String? {
        guard autogroup?.split(whereSeparator: \.isWhitespace) == ["1"] else { return nil }
        // `ID:controllers:path` per line: cgroup v1's `cpu` controller if mounted, else v2's line.
        let lines = (cgroups ?? "").split(separator: "\n").map { $0.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false) }
        let cpu = lines.first { $0.count == 3 && $0[1].split(separator: ",").contains("cpu") }
            ?? lines.first { $0.count == 3 && $0[0] == "0" && $0[1].isEmpty }
        guard let cpu, cpu[2] == "/" else { return nil }
        return "kernel.sched_autogroup_enabled is 1 and this process is in the root CPU cgroup: the campaign connections' "
            + "lower priority holds only against this session's threads, not against Postgres, Redis or the API started "
            + "elsewhere on the same cores (see docs/operations.md, \"Sharing cores\")"
    }

    /// ``priorityCaveat(autogroup:cgroups:)`` for this process.
    public static func priorityCaveat() -> String? {
        /// A small file of /proc, whole; nil if it cannot be opened.
        func read(_ path: String) -> String? {
            guard let file = fopen(path, "r") else { return nil }
            defer { fclose(file) }
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = fread(&buffer, 1, buffer.count, file)
                guard count > 0 else { break }
                bytes += buffer[..<count]
            }
            return String(decoding: bytes, as: UTF8.self)
        }
        return self.priorityCaveat(autogroup: read("/proc/sys/kernel/sched_autogroup_enabled"), cgroups: read("/proc/self/cgroup"))
    }

    /// The loop for the next sender.
    func next() -> any EventLoop {
        self.group.next()
    }

    /// Runs `body` once on each loop's thread and returns what each returned, in loop order: how
    /// a test reads a property of the threads themselves.
    public func onEachThread<Value: Sendable>(_ body: @escaping @Sendable () -> Value) throws -> [Value] {
        try self.group.makeIterator().map { try $0.submit(body).wait() }
    }
}

extension BinarySender {
    /// A sender on one of `loops`' loops.
    public convenience init(configuration: Configuration, on loops: SenderLoops, logger: Logger = Logger(label: "pushfleet.binary-sender")) {
        self.init(configuration: configuration, eventLoop: loops.next(), logger: logger)
    }
}

extension HTTP2Sender {
    /// A sender on one of `loops`' loops.
    /// - Throws: ``TransportError`` when the TLS configuration cannot be used.
    public convenience init(configuration: Configuration, on loops: SenderLoops, logger: Logger = Logger(label: "pushfleet.http2-sender")) throws {
        try self.init(configuration: configuration, eventLoop: loops.next(), logger: logger)
    }
}

extension FeedbackClient {
    /// Connects to `host:port` on one of `loops`' loops and reads all tuples. The service gets 30
    /// seconds.
    /// - Throws: ``TransportError`` if the service cannot be reached or the TLS handshake fails.
    public static func fetch(host: String, port: Int, tls: ClientTLS, serverHostname: String? = nil, on loops: SenderLoops) async throws -> Read {
        try await self.fetch(host: host, port: port, tls: tls, serverHostname: serverHostname, eventLoop: loops.next())
    }
}
