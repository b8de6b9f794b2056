@testable import PushFleetRedis
import Testing

/// Commands as ``RedisCommands`` writes them for the server (the protocol's arrays of bulk
/// strings), and read back.
@Suite struct RedisCommandsTests {
    private func written(_ commands: [[[UInt8]]]) -> String {
        let written = RedisCommands(commands)
        #expect(written.count == commands.count)
        #expect(written.arguments == commands, "read back as given")
        #expect(written.bytes.count <= commands.reduce(0) { $0 + RedisCommands.byteCount(of: $1) })
        return String(decoding: written.bytes, as: UTF8.self)
    }

    @Test func aCommandIsAnArrayOfBulkStrings() {
        #expect(self.written([[Array("GET".utf8), Array("key".utf8)]]) == "*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n")
        // Empty arguments and binary ones (CR, LF and NUL inside) go as they are, by length.
        #expect(self.written([[Array("SET".utf8), [], [0x0D, 0x0A, 0x00]]]) == "*3\r\n$3\r\nSET\r\n$0\r\n\r\n$3\r\n\r\n\u{0}\r\n")
        #expect(self.written([[Array("PING".utf8)], [Array("ECHO".utf8), [0x24]]]) == "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$1\r\n$\r\n")
        #expect(self.written([]).isEmpty)
    }

    @Test func lengthsAreWrittenInDecimalAtEverySize() {
        for length in [9, 10, 32, 99, 100, 101, 999, 1_000, 12_345, 1_048_576] {
            let argument = [UInt8](repeating: UInt8(ascii: "x"), count: length)
            let expected = "*2\r\n$4\r\nECHO\r\n$\(length)\r\n" + String(repeating: "x", count: length) + "\r\n"
            #expect(self.written([[Array("ECHO".utf8), argument]]) == expected, "length \(length)")
        }
        let many = [[UInt8]](repeating: [UInt8(ascii: "a")], count: 1_234)
        #expect(self.written([many]).hasPrefix("*1234\r\n$1\r\na\r\n"))
    }

    @Test func argumentsWrittenInPartsAreOneArgument() {
        var commands = RedisCommands()
        commands.begin(argumentCount: 3)
        commands.appendArgument(Array("RPUSH".utf8))
        [UInt8]("list".utf8).withUnsafeBytes { commands.appendArgument($0) }
        commands.appendArgument(byteCount: 5) { bytes in
            bytes.append(0x01)
            bytes.append(contentsOf: [0x0D, 0x0A, 0x24, 0x39])
        }
        #expect(commands.arguments == [[Array("RPUSH".utf8), Array("list".utf8), [0x01, 0x0D, 0x0A, 0x24, 0x39]]])
        #expect(commands.name(of: 0) == "RPUSH")
        #expect(commands.arguments(of: 0, upTo: 2) == [Array("RPUSH".utf8), Array("list".utf8)], "the first two, as routing reads them")
    }
}
