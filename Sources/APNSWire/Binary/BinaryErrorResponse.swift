public import NIOCore

/// The six-byte error-response packet: `| 8 | status | identifier (4) |`.
public struct BinaryErrorResponse: Hashable, Sendable {
    public var status: BinaryStatus
    public var identifier: UInt32

    public init(status: BinaryStatus, identifier: UInt32) {
        self.status = status
        self.identifier = identifier
    }

    /// The command byte of an error response.
    public static let command: UInt8 = 8
    /// The packet's size in bytes.
    public static let byteCount = 6

    /// Appends the packet to `buffer`.
    public func write(into buffer: inout ByteBuffer) {
        buffer.writeMultipleIntegers(Self.command, self.status.rawValue, self.identifier)
    }
}

/// Decodes the error-response packet of the binary provider protocol.
public struct BinaryErrorResponseDecoder: NIOSingleStepByteToMessageDecoder {
    public typealias InboundOut = BinaryErrorResponse

    public init() {}

    public mutating func decode(buffer: inout ByteBuffer) throws -> BinaryErrorResponse? {
        // On failure `readMultipleIntegers` leaves the reader index where it was.
        guard let (command, status, identifier) = buffer.readMultipleIntegers(endianness: .big, as: (UInt8, UInt8, UInt32).self)
        else { return nil }
        guard command == BinaryErrorResponse.command else {
            throw APNSWireError.unexpectedCommand(command, expected: BinaryErrorResponse.command)
        }
        return BinaryErrorResponse(status: BinaryStatus(rawValue: status), identifier: identifier)
    }

    public mutating func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) throws -> BinaryErrorResponse? {
        try self.decode(buffer: &buffer)
    }
}
