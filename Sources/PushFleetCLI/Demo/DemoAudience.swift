import PushFleetCore

/// A synthetic audience: random tokens, a share marked invalid and a share unregistered, spread
/// evenly (every k-th token, as in the write-ups' experiment).
struct DemoAudience {
    let tokens: [DeviceToken]
    let invalid: Set<DeviceToken>
    let unregistered: Set<DeviceToken>

    init(count: Int, invalidPercent: Double, unregisteredPercent: Double) {
        var generator = SystemRandomNumberGenerator()
        var tokens: [DeviceToken] = []
        tokens.reserveCapacity(count)
        var seen = TokenFingerprintSet(capacity: count)
        while tokens.count < count {
            let bytes = (0..<4).flatMap { _ in withUnsafeBytes(of: generator.next() as UInt64) { Array($0) } }
            let token = try! DeviceToken(bytes: bytes)  // 32 bytes: cannot fail
            if seen.insert(token) { tokens.append(token) }
        }
        self.tokens = tokens
        func every(_ percent: Double, offset: Int) -> Set<DeviceToken> {
            let wanted = Int((Double(count) * percent / 100).rounded())
            guard wanted > 0 else { return [] }
            let step = max(1, count / wanted)
            return Set(stride(from: offset % step, to: count, by: step).prefix(wanted).map { tokens[$0] })
        }
        self.invalid = every(invalidPercent, offset: 0)
        self.unregistered = every(unregisteredPercent, offset: 1).subtracting(self.invalid)
    }
}
