import PushFleetCore
import Synchronization

/// What `/readyz` checks: each check answers `nil` when all is well, or says what is wrong.
///
/// A check that is not ``Check/required`` is reported but does not make the process unready (a
/// coordinator that does not lead is ready: it stands by).
public struct Readiness: Sendable {
    public struct Check: Sendable {
        public var name: String
        public var required: Bool
        public var probe: @Sendable () async -> String?

        public init(_ name: String, required: Bool = true, probe: @escaping @Sendable () async -> String?) {
            self.name = name
            self.required = required
            self.probe = probe
        }
    }

    public struct Report: Sendable, Equatable {
        public var isReady: Bool
        /// Each check's name and what it found (`ok`, or what is wrong), in the order given.
        public var results: [Result]

        public struct Result: Sendable, Equatable {
            public var name: String
            public var required: Bool
            public var problem: String?
        }

        /// `{"ready":true,"checks":{"redis":"ok",…}}`.
        public var json: String {
            let checks = JSONValue.object(self.results.map { ($0.name, .string($0.problem ?? "ok")) })
            return String(decoding: JSONValue.object([("ready", .bool(self.isReady)), ("checks", checks)]).compactUTF8, as: UTF8.self)
        }
    }

    public var checks: [Check]
    /// The longest a probe may take; one that takes longer counts as failed.
    public var timeout: Duration

    public init(_ checks: [Check] = [], timeout: Duration = .seconds(2)) {
        self.checks = checks
        self.timeout = timeout
    }

    /// Runs every check at once, each bounded by ``timeout``.
    public func evaluate() async -> Report {
        let timeout = self.timeout
        let problems = await withTaskGroup(of: (Int, String?).self) { group in
            for (index, check) in self.checks.enumerated() {
                group.addTask { (index, await Self.run(check, timeout: timeout)) }
            }
            var problems = [String?](repeating: nil, count: self.checks.count)
            for await (index, problem) in group { problems[index] = problem }
            return problems
        }
        let results = zip(self.checks, problems).map { Report.Result(name: $0.name, required: $0.required, problem: $1) }
        return Report(isReady: results.allSatisfy { !$0.required || $0.problem == nil }, results: results)
    }

    /// The probe's answer, or a timeout's. The probe runs in a task of its own, not a child: a
    /// probe stuck in a blocking call must not hold the answer back.
    private static func run(_ check: Check, timeout: Duration) async -> String? {
        await Self.first(check.probe, orAfter: timeout, "no answer within \(timeout)")
    }

    /// What `work` returns, or `late` once `timeout` has passed; `work` runs in a task of its own
    /// and may go on after that.
    static func first<Value: Sendable>(_ work: @escaping @Sendable () async -> Value, orAfter timeout: Duration, _ late: Value) async -> Value {
        await withCheckedContinuation { (continuation: CheckedContinuation<Value, Never>) in
            let answer = FirstAnswer(continuation)
            Task { answer.give(await work()) }
            Task {
                try? await Task.sleep(for: timeout)
                answer.give(late)
            }
        }
    }
}

/// Resumes a continuation with the first value given, and ignores the rest.
private final class FirstAnswer<Value: Sendable>: Sendable {
    private let continuation: Mutex<CheckedContinuation<Value, Never>?>

    init(_ continuation: CheckedContinuation<Value, Never>) {
        self.continuation = Mutex(continuation)
    }

    func give(_ value: Value) {
        self.continuation.withLock { $0.take() }?.resume(returning: value)
    }
}
