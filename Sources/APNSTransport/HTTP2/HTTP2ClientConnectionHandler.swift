import APNSWire
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOTLS

/// Translates one HTTP/2 connection's frames and events for ``HTTP2SenderCore`` and writes the
/// frames it asks for. Decides nothing itself. Sits after `NIOHTTP2Handler` (no multiplexer), so it
/// sees every frame of every stream.
///
/// Without a multiplexer nothing else returns flow-control credit, so this handler does: answer
/// bodies (every rejection carries one) are counted against the connection's window and, while a
/// stream stays open, its own, and `WINDOW_UPDATE` goes out as ``HTTP2InboundWindow`` decides. A
/// connection carries any number of rejections without waiting for credit.
final class HTTP2ClientConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private let core: HTTP2SenderCore
    private let connection: HTTP2Connection
    private let coalescer: HTTP2WriteCoalescer
    private var context: ChannelHandlerContext?
    /// Answers whose HEADERS came without END_STREAM: their status, the body so far, and the
    /// stream's receive window.
    private var partial: [Int32: (status: Int, body: ByteBuffer?, window: HTTP2InboundWindow)] = [:]
    private var connectionWindow: HTTP2InboundWindow
    /// A `WINDOW_UPDATE` was written during this read burst and waits for its flush.
    private var creditWritten = false
    private var error: (any Error)?

    init(core: HTTP2SenderCore, connection: HTTP2Connection, coalescer: HTTP2WriteCoalescer, connectionWindow: Int) {
        self.core = core
        self.connectionWindow = HTTP2InboundWindow(target: connectionWindow)
        self.connection = connection
        self.coalescer = coalescer
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    // MARK: - Writing, on the core's behalf

    /// Writes one request: HEADERS, then the payload as one DATA frame ending the stream. Not sent
    /// until ``flush()``: the DATA frame is flushed out of `NIOHTTP2Handler` at once, so requests
    /// leave in stream order, but ``HTTP2WriteCoalescer`` holds the bytes (see there why).
    func writeRequest(streamID: Int32, headers: HPACKHeaders, payload: ByteBuffer) {
        guard let context = self.context else { return }
        self.coalescer.holdFlushes()
        let id = HTTP2StreamID(streamID)
        context.write(self.wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers)))), promise: nil)
        context.write(
            self.wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(payload), endStream: true)))),
            promise: nil
        )
        context.flush()
    }

    /// Sends everything written so far in one TLS write.
    func flush() {
        guard let context = self.context else { return }
        self.coalescer.flushBatch(from: context)
    }

    func ping() {
        guard let context = self.context else { return }
        context.writeAndFlush(self.wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(), ack: false))), promise: nil)
    }

    func close() {
        self.context?.close(promise: nil)
    }

    // MARK: - Events

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? StreamClosedEvent {
            if let reason = event.reason {
                let id = Int32(event.streamID)
                self.partial.removeValue(forKey: id)
                self.core.streamReset(self.connection, streamID: id, refused: reason == .refusedStream)
            }
        } else if let event = event as? TLSUserEvent, case .handshakeCompleted(let negotiated) = event {
            if negotiated == "h2" {
                if let increment = self.connectionWindow.initialIncrement {
                    self.returnCredit(context: context, streamID: .rootStream, increment)
                    self.creditWritten = false
                    self.coalescer.flushBatch(from: context)
                }
                self.core.connectionReady(self.connection, channel: context.channel, handler: self)
            } else {
                self.error = NotHTTP2(negotiated: negotiated)
                context.close(promise: nil)
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = self.unwrapInboundIn(data)
        let id = Int32(frame.streamID)
        switch frame.payload {
        case .headers(let headers):
            if !self.partial.isEmpty, var answer = self.partial[id] {
                // Trailers.
                if headers.endStream {
                    self.partial.removeValue(forKey: id)
                    self.core.answered(self.connection, streamID: id, status: answer.status, body: answer.body)
                } else {
                    answer.status = Self.status(headers.headers) ?? answer.status
                    self.partial[id] = answer
                }
            } else {
                let status = Self.status(headers.headers) ?? 0
                if headers.endStream {
                    self.core.answered(self.connection, streamID: id, status: status, body: nil)
                } else {
                    self.partial[id] = (status, nil, HTTP2InboundWindow(target: HTTP2InboundWindow.protocolDefault))
                }
            }
        case .data(let data):
            let length = HTTP2InboundWindow.flowControlledLength(payload: data.data.readableBytes, paddingBytes: data.paddingBytes)
            if let increment = self.connectionWindow.received(length) { self.returnCredit(context: context, streamID: .rootStream, increment) }
            guard var answer = self.partial[id] else { break }
            if case .byteBuffer(var bytes) = data.data, bytes.readableBytes > 0 {
                if answer.body == nil {
                    answer.body = bytes
                } else {
                    answer.body!.writeBuffer(&bytes)
                }
            }
            if data.endStream {
                self.partial.removeValue(forKey: id)
                self.core.answered(self.connection, streamID: id, status: answer.status, body: answer.body)
            } else {
                // A body longer than half a stream window: the stream needs credit of its own.
                if let increment = answer.window.received(length) { self.returnCredit(context: context, streamID: frame.streamID, increment) }
                self.partial[id] = answer
            }
        case .settings(.settings(let settings)):
            let limit = settings.last(where: { $0.parameter == .maxConcurrentStreams })?.value
            self.core.settingsReceived(self.connection, maxConcurrentStreams: limit)
        case .goAway(let lastStreamID, let errorCode, let debugData):
            self.core.goAwayReceived(self.connection, lastStreamID: Int32(lastStreamID), errorCode: "\(errorCode)", debugData: debugData)
        case .ping(_, ack: true):
            self.core.pingAnswered(self.connection)
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.core.readComplete(self.connection)
        if self.creditWritten {
            // The core's batch, if it wrote one, has carried the update already; this is cheap then.
            self.creditWritten = false
            self.coalescer.flushBatch(from: context)
        }
        context.fireChannelReadComplete()
    }

    /// Writes `WINDOW_UPDATE`; it leaves with the next flush, at the latest at the end of this read burst.
    private func returnCredit(context: ChannelHandlerContext, streamID: HTTP2StreamID, _ increment: Int) {
        context.write(self.wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .windowUpdate(windowSizeIncrement: increment))), promise: nil)
        self.creditWritten = true
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { self.core.writable(self.connection) }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.core.connectionClosed(self.connection, error: self.error)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // TLS failures, a reset, a protocol error: the connection is done.
        self.error = self.error ?? error
        context.close(promise: nil)
    }

    private static func status(_ headers: HPACKHeaders) -> Int? {
        // `:status` comes first in every answer.
        for (name, value, _) in headers where name == ":status" { return Int(value) }
        return nil
    }
}

/// The server did not agree to HTTP/2 in the TLS handshake.
struct NotHTTP2: Error, CustomStringConvertible {
    let negotiated: String?
    var description: String { "the server did not negotiate HTTP/2 (ALPN: \(self.negotiated ?? "none"))" }
}

/// The connection closed before the TLS handshake completed, without an error of its own.
struct ClosedDuringHandshake: Error, CustomStringConvertible {
    var description: String { "closed during the TLS handshake" }
}
