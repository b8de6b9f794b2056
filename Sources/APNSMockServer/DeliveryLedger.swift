import Foundation
public import PushFleetCore
import NIOConcurrencyHelpers

/// Every notification the simulator accepted, counted per device token, plus what it rejected and
/// why. Shared by the binary gateway and the HTTP/2 API; exposed in-process and as `/stats`.
public final class DeliveryLedger: Sendable {
    /// A consistent reading of the ledger.
    public struct Snapshot: Hashable, Sendable {
        /// Notifications accepted, duplicates included.
        public var accepted: Int
        /// Distinct tokens accepted at least once.
        public var distinctTokens: Int
        /// Distinct tokens accepted more than once.
        public var duplicatedTokens: Int
        /// Rejections by reason (`InvalidToken`, `BadDeviceToken`, …).
        public var rejected: [String: Int]
        /// Connections accepted since the last reset, by protocol (`binary`, `feedback`, `http2`).
        public var connections: [String: Int]
        /// Connections the simulator closed on purpose (error response, fault injection), by cause.
        public var closes: [String: Int]
        /// HTTP/2 PING frames received (acknowledgements not counted).
        public var pings: Int
        /// Approximate memory used by the per-token counts, in bytes.
        public var memoryBytes: Int

        /// Accepted notifications beyond the first for their token.
        public var duplicateDeliveries: Int { self.accepted - self.distinctTokens }
    }

    private struct State {
        var counter = FingerprintCounter()
        var accepted = 0
        var rejected: [String: Int] = [:]
        var connections: [String: Int] = [:]
        var closes: [String: Int] = [:]
        var pings = 0
        /// Accepted notifications by UNIX second of the simulator's clock, the last
        /// ``DeliveryLedger/timelineSeconds`` of them.
        var perSecond: [Int: Int] = [:]
        /// The digest of the payload each token was last accepted with, when the simulator records them.
        var payloads: [UInt64: UInt64] = [:]
    }

    /// How many seconds of acceptances ``acceptedPerSecond()`` keeps.
    public static let timelineSeconds = 3_600

    private let state = NIOLockedValueBox(State())

    public init() {}

    /// Records accepted notifications by token fingerprint; one lock acquisition per batch.
    func recordAccepted(fingerprints: [UInt64]) {
        guard !fingerprints.isEmpty else { return }
        let second = Int(Date().timeIntervalSince1970)
        self.state.withLockedValue { state in
            for fingerprint in fingerprints { state.counter.increment(fingerprint) }
            state.accepted += fingerprints.count
            if state.perSecond[second] == nil, state.perSecond.count >= Self.timelineSeconds {
                state.perSecond = state.perSecond.filter { $0.key > second - Self.timelineSeconds }
            }
            state.perSecond[second, default: 0] += fingerprints.count
        }
    }

    /// Records the payloads accepted notifications carried: (token fingerprint, ``digest(_:)``).
    func recordPayloads(_ digests: [(fingerprint: UInt64, digest: UInt64)]) {
        guard !digests.isEmpty else { return }
        self.state.withLockedValue { state in
            for (fingerprint, digest) in digests { state.payloads[fingerprint] = digest }
        }
    }

    /// The ``digest(_:)`` of the payload `token` was last accepted with; nil if it was not, or if
    /// the simulator does not record payloads (``MockAPNSConfiguration/recordPayloads``).
    public func payloadDigest(of token: DeviceToken) -> UInt64? {
        let fingerprint = token.fingerprint
        return self.state.withLockedValue { $0.payloads[fingerprint] }
    }

    /// A payload's digest as the ledger keeps it: 64-bit FNV-1a of its bytes.
    public static func digest(_ payload: some Sequence<UInt8>) -> UInt64 {
        var digest = PayloadDigest()
        digest.add(payload)
        return digest.value
    }

    /// Records one accepted notification for `token`.
    public func recordAccepted(_ token: DeviceToken) {
        self.recordAccepted(fingerprints: [token.fingerprint])
    }

    /// Records a rejection with APNs' reason string.
    public func recordRejected(reason: String) {
        self.state.withLockedValue { $0.rejected[reason, default: 0] += 1 }
    }

    /// Records rejections counted by reason; one lock acquisition per batch.
    func recordRejected(counts: [(reason: String, count: Int)]) {
        self.state.withLockedValue { state in
            for (reason, count) in counts { state.rejected[reason, default: 0] += count }
        }
    }

    func recordConnection(_ kind: String) {
        self.state.withLockedValue { $0.connections[kind, default: 0] += 1 }
    }

    func recordClose(_ cause: String) {
        self.state.withLockedValue { $0.closes[cause, default: 0] += 1 }
    }

    func recordPing() {
        self.state.withLockedValue { $0.pings += 1 }
    }

    /// How many times `token` was accepted.
    public func deliveries(of token: DeviceToken) -> Int {
        let fingerprint = token.fingerprint
        return self.state.withLockedValue { $0.counter.count(fingerprint) }
    }

    public func snapshot() -> Snapshot {
        self.state.withLockedValue { state in
            Snapshot(
                accepted: state.accepted,
                distinctTokens: state.counter.distinct,
                duplicatedTokens: state.counter.duplicated,
                rejected: state.rejected,
                connections: state.connections,
                closes: state.closes,
                pings: state.pings,
                memoryBytes: state.counter.memoryBytes
            )
        }
    }

    /// Accepted notifications in each second (UNIX seconds of the simulator's clock) of the last
    /// hour that had any, in order: how evenly a throttled campaign arrived.
    public func acceptedPerSecond() -> [(second: Int, accepted: Int)] {
        self.state.withLockedValue { $0.perSecond }.sorted { $0.key < $1.key }.map { (second: $0.key, accepted: $0.value) }
    }

    /// Forgets everything.
    public func reset() {
        self.state.withLockedValue { $0 = State() }
    }
}

/// 64-bit FNV-1a, fed as a payload's bytes arrive (over HTTP/2, in any number of DATA frames).
struct PayloadDigest {
    private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325

    mutating func add(_ bytes: some Sequence<UInt8>) {
        for byte in bytes { self.value = (self.value ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
    }
}
