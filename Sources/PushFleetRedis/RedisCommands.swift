/// Commands written in the Redis serialization protocol as a client sends them, one after another
/// in one buffer: each an array of bulk strings, `*<count>\r\n` and, per argument,
/// `$<length>\r\n<bytes>\r\n`. Built argument by argument, a pipeline of thousands of commands
/// costs one buffer, not an array per argument.
public struct RedisCommands: Sendable {
    /// The commands' bytes, as they go to the server.
    public private(set) var bytes: [UInt8] = []
    /// Where each command starts in ``bytes``.
    private var starts: [Int] = []
    /// Arguments the command being written still expects.
    private var argumentsDue = 0

    public init() {}

    /// The commands given, each its name and arguments.
    public init(_ commands: [[[UInt8]]]) {
        self.bytes.reserveCapacity(commands.reduce(0) { $0 + Self.byteCount(of: $1) })
        for command in commands { self.append(command) }
    }

    /// How many commands.
    public var count: Int { self.starts.count }
    public var isEmpty: Bool { self.starts.isEmpty }
    /// Whether the last command has all its arguments (a server would wait for the rest).
    public var isComplete: Bool { self.argumentsDue == 0 }

    /// Appends the command `arguments`, its name first.
    public mutating func append(_ arguments: [[UInt8]]) {
        self.begin(argumentCount: arguments.count)
        for argument in arguments { self.appendArgument(argument) }
    }

    /// Starts a command of `argumentCount` arguments (its name counted); give each with an
    /// `appendArgument` call.
    public mutating func begin(argumentCount: Int) {
        precondition(self.argumentsDue == 0, "the last command has \(self.argumentsDue) arguments still to come")
        precondition(argumentCount > 0, "a Redis command needs at least its name")
        self.starts.append(self.bytes.count)
        self.argumentsDue = argumentCount
        self.bytes.append(UInt8(ascii: "*"))
        self.appendDecimal(argumentCount)
    }

    public mutating func appendArgument(_ argument: [UInt8]) {
        argument.withUnsafeBytes { self.appendArgument($0) }
    }

    public mutating func appendArgument(_ argument: UnsafeRawBufferPointer) {
        self.beginArgument(byteCount: argument.count)
        self.bytes.append(contentsOf: argument)
        self.appendLineEnd()
    }

    /// Appends an argument of `byteCount` bytes that `write` appends to the buffer given (in
    /// parts, as it likes).
    public mutating func appendArgument(byteCount: Int, _ write: (inout [UInt8]) -> Void) {
        self.beginArgument(byteCount: byteCount)
        let end = self.bytes.count + byteCount
        write(&self.bytes)
        precondition(self.bytes.count == end, "an argument of \(byteCount) bytes was written as \(byteCount + self.bytes.count - end)")
        self.appendLineEnd()
    }

    /// Reserves room for `byteCount` more bytes.
    public mutating func reserveCapacity(_ byteCount: Int) {
        self.bytes.reserveCapacity(self.bytes.count + byteCount)
    }

    private mutating func beginArgument(byteCount: Int) {
        precondition(self.argumentsDue > 0, "an argument beyond the command's count")
        self.argumentsDue -= 1
        self.bytes.append(UInt8(ascii: "$"))
        self.appendDecimal(byteCount)
    }

    private mutating func appendLineEnd() {
        self.bytes.append(UInt8(ascii: "\r"))
        self.bytes.append(UInt8(ascii: "\n"))
    }

    /// Appends `value`'s decimal digits and `\r\n`.
    private mutating func appendDecimal(_ value: Int) {
        precondition(value >= 0)
        if value < 10 {
            self.bytes.append(UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: value))
        } else if value < 100 {
            self.bytes.append(UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: value / 10))
            self.bytes.append(UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: value % 10))
        } else {
            let start = self.bytes.count
            var rest = value
            while rest > 0 {
                self.bytes.append(UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 10))
                rest /= 10
            }
            self.bytes[start...].reverse()
        }
        self.appendLineEnd()
    }

    /// The bytes ``append(_:)`` writes for `arguments`, or a little more.
    static func byteCount(of arguments: [[UInt8]]) -> Int {
        arguments.reduce(24) { $0 + $1.count + 24 }
    }

    // MARK: - Reading them back

    /// Command `index`'s name and arguments, read back from ``bytes``: for the rare paths (a
    /// cluster's routing, a redirect, an error's message) that need them one by one.
    public func arguments(of index: Int) -> [[UInt8]] {
        self.arguments(of: index, upTo: .max)
    }

    /// Command `index`'s name and first arguments, `limit` in all at most.
    func arguments(of index: Int, upTo limit: Int) -> [[UInt8]] {
        precondition(self.isComplete, "the last command is not complete")
        var at = self.starts[index]
        func number() -> Int {
            at += 1  // `*` or `$`
            var value = 0
            while self.bytes[at] != UInt8(ascii: "\r") {
                value = value * 10 + Int(self.bytes[at] - UInt8(ascii: "0"))
                at += 1
            }
            at += 2
            return value
        }
        var arguments: [[UInt8]] = []
        let count = min(number(), limit)
        arguments.reserveCapacity(count)
        for _ in 0..<count {
            let length = number()
            arguments.append(Array(self.bytes[at..<(at + length)]))
            at += length + 2
        }
        return arguments
    }

    /// Every command's name and arguments; see ``arguments(of:)``.
    public var arguments: [[[UInt8]]] { self.starts.indices.map { self.arguments(of: $0) } }

    /// Command `index`'s name, upper case, as errors name it (arguments may be tokens or payloads).
    public func name(of index: Int) -> String {
        String(decoding: self.arguments(of: index).first ?? [], as: UTF8.self).uppercased()
    }
}
