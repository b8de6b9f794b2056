public import PushFleetCore

/// The rejections of one checkpoint, packed into one field of one stream entry (`k=rejections s b`).
///
/// A stale audience rejects a token in five; one entry per checkpoint instead of one per token
/// spares Redis an `XADD`, and the coordinator a field map, per rejection. Layout, big-endian:
/// a version byte (1), then per rejection the token's length (1 byte, 1...255), its bytes, the
/// reason's length (2 bytes), its UTF-8, and APNs' timestamp in milliseconds since 1970
/// (8 bytes, signed; 0 = none).
public enum RejectionPack {
    public static let version: UInt8 = 1

    public static func encode(_ rejections: [Rejection]) -> [UInt8] {
        var bytes: [UInt8] = [Self.version]
        bytes.reserveCapacity(1 + rejections.count * (1 + 32 + 2 + 16 + 8))
        for rejection in rejections {
            rejection.token.withUnsafeBytes { token in
                bytes.append(UInt8(token.count))
                bytes.append(contentsOf: token)
            }
            var reason = Self.storedReason(rejection.reason)
            reason.withUTF8 { utf8 in
                bytes.append(UInt8(truncatingIfNeeded: utf8.count >> 8))
                bytes.append(UInt8(truncatingIfNeeded: utf8.count))
                bytes.append(contentsOf: utf8)
            }
            let timestamp = UInt64(bitPattern: rejection.timestampMilliseconds ?? 0)
            for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: timestamp >> UInt64(shift))) }
        }
        return bytes
    }

    /// - Returns: The rejections in packed order, or nil when `bytes` is not a pack this version wrote.
    public static func decode(_ bytes: [UInt8]) -> [Rejection]? {
        guard bytes.first == Self.version else { return nil }
        var rejections: [Rejection] = []
        // Few distinct reasons: each is made a String once per pack.
        var reasons: [(bytes: ArraySlice<UInt8>, reason: RejectionReason)] = []
        var index = 1
        func take(_ count: Int) -> ArraySlice<UInt8>? {
            guard count <= bytes.count - index else { return nil }
            defer { index += count }
            return bytes[index..<index + count]
        }
        while index < bytes.count {
            guard let tokenLength = take(1)?.first, let tokenBytes = take(Int(tokenLength)),
                let token = try? DeviceToken(bytes: tokenBytes),
                let lengthBytes = take(2), let reasonBytes = take(Int(lengthBytes.first!) << 8 | Int(lengthBytes.last!)),
                let timestampBytes = take(8)
            else { return nil }
            let reason: RejectionReason
            if let known = reasons.first(where: { $0.bytes == reasonBytes }) {
                reason = known.reason
            } else {
                reason = RejectionReason(String(decoding: reasonBytes, as: UTF8.self))
                reasons.append((reasonBytes, reason))
            }
            let timestamp = Int64(bitPattern: timestampBytes.reduce(0) { $0 << 8 | UInt64($1) })
            rejections.append(Rejection(token: token, reason: reason, timestampMilliseconds: timestamp == 0 ? nil : timestamp))
        }
        return rejections
    }

    /// How many of `rejections` have each reason, for the `rejected:<reason>` counters.
    static func counts(_ rejections: [Rejection]) -> [(reason: Substring, count: Int)] {
        var counts: [(reason: Substring, count: Int)] = []
        for rejection in rejections {
            let reason = Self.storedReason(rejection.reason)
            if let index = counts.firstIndex(where: { $0.reason == reason }) {
                counts[index].count += 1
            } else {
                counts.append((reason, 1))
            }
        }
        return counts
    }

    /// The reason as packed and counted: APNs' reasons are short names; one longer than a length
    /// field holds (only a broken or hostile gateway sends one) is cut at a character boundary.
    static func storedReason(_ reason: RejectionReason) -> Substring {
        let reason = reason.rawValue
        let utf8 = reason.utf8
        guard utf8.count > Int(UInt16.max) else { return reason[...] }
        var end = utf8.index(utf8.startIndex, offsetBy: Int(UInt16.max))
        while end.samePosition(in: reason.unicodeScalars) == nil { end = utf8.index(before: end) }
        return reason[..<end]
    }
}
