import NIOCore

/// Sits between TLS and `NIOHTTP2Handler` and takes ``offset`` off every
/// SETTINGS_MAX_CONCURRENT_STREAMS value that carries it, so that the peer is told a limit
/// `NIOHTTP2Handler` does not enforce.
///
/// APNs allows one stream until a request authenticates, then raises the limit, and refuses a
/// stream beyond it with RST_STREAM REFUSED_STREAM. `NIOHTTP2Handler` would instead treat such a
/// stream as a connection error (GOAWAY PROTOCOL_ERROR). So it is only ever given limits of
/// `offset + n`, which it cannot reach, the peer is told `n`, and ``HTTP2GatewayHandler`` enforces
/// `n` itself.
final class StreamLimitRewriter: ChannelOutboundHandler {
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    static let offset = 1 << 30

    /// The value to give `NIOHTTP2Handler` for an advertised limit of `limit` streams.
    static func encode(_ limit: Int) -> Int { Self.offset + limit }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        // `NIOHTTP2Handler` writes every frame but DATA whole, in a buffer of its own; this server's
        // DATA payloads are JSON text, whose fourth byte is never 4. A SETTINGS frame is a 9-byte
        // header (length 24 bits, type 4, flags, stream 0) and 6-byte entries (identifier 16 bits,
        // value 32 bits).
        guard case .byteBuffer(var buffer) = self.unwrapOutboundIn(data),
            let (lengthHigh, lengthLow, type, flags, stream) = buffer.getMultipleIntegers(
                at: buffer.readerIndex,
                as: (UInt8, UInt16, UInt8, UInt8, UInt32).self
            ),
            type == 4, flags & 1 == 0, stream == 0,
            Int(lengthHigh) << 16 | Int(lengthLow) == buffer.readableBytes - 9
        else {
            context.write(data, promise: promise)
            return
        }
        var offset = buffer.readerIndex + 9
        while offset + 6 <= buffer.writerIndex {
            if buffer.getInteger(at: offset, as: UInt16.self) == 3,  // SETTINGS_MAX_CONCURRENT_STREAMS
                let value = buffer.getInteger(at: offset + 2, as: UInt32.self), value >= Self.offset
            {
                buffer.setInteger(value - UInt32(Self.offset), at: offset + 2)
            }
            offset += 6
        }
        context.write(self.wrapOutboundOut(.byteBuffer(buffer)), promise: promise)
    }
}
