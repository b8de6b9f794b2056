import PostgresNIO
import PushFleetCore

/// Device tokens bound as one `bytea[]` parameter, written straight from each token's bytes: no
/// intermediate `ByteBuffer` per token, which matters when a batch holds tens of thousands.
struct TokenArray: PostgresNonThrowingEncodable, PostgresDynamicTypeEncodable {
    let tokens: [DeviceToken]

    init(_ tokens: some Collection<DeviceToken>) { self.tokens = Array(tokens) }

    static var psqlType: PostgresDataType { .byteaArray }
    static var psqlFormat: PostgresFormat { .binary }

    /// The binary array format: dimensions, has-nulls flag, element type, then for the one dimension
    /// its length and lower bound, then each element as a length-prefixed value.
    func encode<JSONEncoder: PostgresJSONEncoder>(into buffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>) {
        buffer.writeByteaArrayHeader(count: self.tokens.count)
        for token in self.tokens {
            buffer.writeInteger(Int32(token.count))
            token.withUnsafeBytes { _ = buffer.writeBytes($0) }
        }
    }
}

extension ByteBuffer {
    /// The head of a one-dimensional `bytea[]` in the binary array format (dimensions, has-nulls
    /// flag, element type, then the length and lower bound); `count` length-prefixed elements follow.
    mutating func writeByteaArrayHeader(count: Int) {
        self.writeInteger(count == 0 ? 0 : 1, as: Int32.self)
        self.writeInteger(0, as: Int32.self)
        self.writeInteger(PostgresDataType.bytea.rawValue)
        guard count > 0 else { return }
        self.writeInteger(Int32(count))
        self.writeInteger(1, as: Int32.self)
    }
}

extension DeviceToken {
    /// The token as a `bytea` bind.
    var byteBuffer: ByteBuffer { self.withUnsafeBytes { ByteBuffer(bytes: $0) } }

    /// Reads a token back from a `bytea` column.
    init(postgres buffer: ByteBuffer) throws {
        self = try buffer.withUnsafeReadableBytes { try DeviceToken(bytes: $0) }
    }
}
