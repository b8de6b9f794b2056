/// Where a payload is going, which decides its size limit in bytes.
public struct PayloadFormat: Hashable, Sendable, CustomStringConvertible {
    private enum Base: Hashable, Sendable { case binaryLegacy, binaryFrame, http2, voip }
    private let base: Base
    private init(_ base: Base) { self.base = base }

    /// Binary protocol commands 0 and 1: 256 bytes.
    public static let binaryLegacy = Self(.binaryLegacy)
    /// Binary protocol command 2: 2048 bytes.
    public static let binaryFrame = Self(.binaryFrame)
    /// HTTP/2 provider API, every push type but VoIP: 4096 bytes.
    public static let http2 = Self(.http2)
    /// HTTP/2 provider API, VoIP pushes: 5120 bytes.
    public static let voip = Self(.voip)

    /// The HTTP/2 format for notifications of `pushType` (`apns-push-type`): VoIP pushes may be larger.
    public static func http2(pushType: String?) -> Self {
        pushType == "voip" ? .voip : .http2
    }

    /// The largest payload accepted, in bytes of UTF-8 JSON.
    public var maximumByteCount: Int {
        switch self.base {
        case .binaryLegacy: return 256
        case .binaryFrame: return 2048
        case .http2: return 4096
        case .voip: return 5120
        }
    }

    public var description: String {
        switch self.base {
        case .binaryLegacy: return "binary protocol commands 0 and 1"
        case .binaryFrame: return "binary protocol command 2"
        case .http2: return "HTTP/2 provider API"
        case .voip: return "HTTP/2 provider API for VoIP pushes"
        }
    }
}
