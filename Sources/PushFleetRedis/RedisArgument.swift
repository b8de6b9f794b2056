public import PushFleetCore

/// A value that can be one argument of a Redis command: its bytes, sent binary-safe.
public protocol RedisArgumentConvertible {
    /// The argument's bytes as Redis receives them.
    var redisArgument: [UInt8] { get }
}

extension String: RedisArgumentConvertible {
    /// The UTF-8 bytes of the string.
    public var redisArgument: [UInt8] { Array(self.utf8) }
}

extension Substring: RedisArgumentConvertible {
    /// The UTF-8 bytes of the substring.
    public var redisArgument: [UInt8] { Array(self.utf8) }
}

extension Int: RedisArgumentConvertible {
    /// The decimal digits of the number, as Redis expects integers.
    public var redisArgument: [UInt8] { Array(String(self).utf8) }
}

extension Int64: RedisArgumentConvertible {
    /// The decimal digits of the number, as Redis expects integers.
    public var redisArgument: [UInt8] { Array(String(self).utf8) }
}

extension Array: RedisArgumentConvertible where Element == UInt8 {
    /// The bytes themselves.
    public var redisArgument: [UInt8] { self }
}

extension DeviceToken: RedisArgumentConvertible {
    /// The token's raw bytes (not hex).
    public var redisArgument: [UInt8] { self.bytes }
}

/// Builds the arguments of one command from mixed values: `RedisCommand.arguments("HGET", key, field)`.
public enum RedisCommand {
    /// The bytes of each value, in order, ready for ``RedisConnection/command(_:)`` or a pipeline.
    public static func arguments(_ parts: any RedisArgumentConvertible...) -> [[UInt8]] {
        parts.map(\.redisArgument)
    }
}
