import APNSWire
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOSSL

/// Serves one connection of the HTTP/2 provider API on raw `HTTP2Frame`s (no stream channels):
/// collects each stream's headers and body until END_STREAM, judges it with
/// ``HTTP2RequestValidator``, and answers on the stream. A read burst's answers are written together
/// in `channelReadComplete`, after its verdicts are in the ledger, with one flush: a client never
/// sees a 200 the ledger does not hold yet.
///
/// It also enforces the stream limit it advertised (1 until a request authenticates, see
/// ``StreamLimitRewriter``), keeps the connection's flow-control window open, and injects the
/// configured ``MockAPNSConfiguration/HTTP2Faults``. With an idle timeout configured, a connection on
/// which no request started for that long gets `GOAWAY` `{"reason":"IdleTimeout"}` and is closed.
final class HTTP2GatewayHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// A request stream whose END_STREAM has not arrived yet.
    private struct PendingRequest {
        var headers: HPACKHeaders
        var bodyBytes = 0
    }

    private let configuration: MockAPNSConfiguration
    private let faults: MockAPNSConfiguration.HTTP2Faults
    private let ledger: DeliveryLedger
    private let outage: GatewayOutage
    private let gatewayStreams: AcceptedCounter
    private let coalescer: HTTP2WriteCoalescer
    private let logger: Logger
    private var validator: HTTP2RequestValidator
    private var identifiers = APNSIdentifier()
    private var pending: [HTTP2StreamID: PendingRequest] = [:]
    /// Streams processed and not answered yet (pending, or waiting for the answer delay).
    private var unanswered = 0
    private var streamLimit = 1
    private var streamsOnConnection = 0
    private var goAwayLastStreamID: HTTP2StreamID? = nil
    /// The highest stream processed, which an idle-timeout GOAWAY names.
    private var lastStreamID: HTTP2StreamID = .rootStream
    private var lastRequestStarted: NIODeadline = .now()
    private var idleCheck: Scheduled<Void>? = nil
    private var certificateVerified: Bool? = nil
    private var windowOpened = false
    private var receiveWindow: HTTP2InboundWindow
    private var wroteSinceFlush = false
    /// This read burst's answers, written in `channelReadComplete` (or after the answer delay).
    private var answers: [HTTP2Frame] = []
    private var answerCount = 0
    private var fingerprints: [UInt64] = []
    private var rejections: [String: Int] = [:]
    private var closing = false

    init(
        configuration: MockAPNSConfiguration,
        keys: [String: MockAPNSConfiguration.ProviderKey],
        ledger: DeliveryLedger,
        gatewayStreams: AcceptedCounter,
        outage: GatewayOutage,
        coalescer: HTTP2WriteCoalescer,
        logger: Logger
    ) {
        self.configuration = configuration
        self.faults = configuration.http2Faults
        self.ledger = ledger
        self.gatewayStreams = gatewayStreams
        self.outage = outage
        self.coalescer = coalescer
        self.logger = logger
        self.validator = HTTP2RequestValidator(configuration: configuration, keys: keys)
        self.receiveWindow = HTTP2InboundWindow(target: configuration.http2.connectionWindow)
        self.fingerprints.reserveCapacity(256)
    }

    func channelActive(context: ChannelHandlerContext) {
        self.ledger.recordConnection("http2")
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = self.unwrapInboundIn(data)
        if !self.windowOpened {
            // The client's SETTINGS came first: its preface is in, so the window may grow now, and
            // the connection counts as idle from here (a slow TLS handshake is not idleness).
            self.windowOpened = true
            self.lastRequestStarted = .now()
            self.scheduleIdleCheck(context: context)
            if let increment = self.receiveWindow.initialIncrement {
                self.write(context: context, HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment)))
            }
        }
        switch frame.payload {
        case .headers(let headers):
            self.receivedHeaders(context: context, streamID: frame.streamID, headers: headers)
        case .data(let data):
            self.receivedData(context: context, streamID: frame.streamID, data: data)
        case .rstStream:
            if self.pending.removeValue(forKey: frame.streamID) != nil { self.unanswered -= 1 }
        case .ping(_, let ack):
            if !ack { self.ledger.recordPing() }  // NIOHTTP2Handler has answered it
        default:
            break  // SETTINGS are acknowledged by NIOHTTP2Handler; the rest needs nothing.
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.flushLedger()
        if !self.answers.isEmpty { self.writeAnswers(context: context) }
        if self.wroteSinceFlush {
            self.wroteSinceFlush = false
            self.coalescer.flushBatch(from: context)
        }
        self.closeIfDone(context: context)
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.idleCheck?.cancel()
        self.idleCheck = nil
        self.flushLedger()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // NIOHTTP2Handler has answered a stream error with RST_STREAM, and a connection error with
        // GOAWAY, which leaves the connection for us to close.
        self.logger.debug("http2 gateway error", metadata: ["error": "\(error)"])
        if !(error is NIOHTTP2Errors.StreamError) {
            self.closing = true
            self.idleCheck?.cancel()
            context.close(promise: nil)
        }
    }

    // MARK: - Frames

    private func receivedHeaders(context: ChannelHandlerContext, streamID: HTTP2StreamID, headers: HTTP2Frame.FramePayload.Headers) {
        if let last = self.goAwayLastStreamID, streamID > last { return }
        if self.pending[streamID] != nil {
            // Trailers: nothing in them matters, but they can end the stream.
            if headers.endStream { self.complete(context: context, streamID: streamID) }
            return
        }
        guard self.unanswered < self.streamLimit else {
            self.write(context: context, HTTP2Frame(streamID: streamID, payload: .rstStream(.refusedStream)))
            return
        }
        self.pending[streamID] = PendingRequest(headers: headers.headers)
        self.unanswered += 1
        self.streamsOnConnection += 1
        self.lastStreamID = streamID
        if self.configuration.http2.idleTimeout != nil { self.lastRequestStarted = .now() }
        if let after = self.faults.goAwayAfter, after > 0, self.streamsOnConnection == after {
            // Streams above this one are ignored from now on. The GOAWAY goes out once every stream
            // up to here is answered, just before the close: NIOHTTP2Handler, once it has sent
            // GOAWAY and has no stream left, treats any frame still in flight as a connection error.
            self.goAwayLastStreamID = streamID
        }
        if headers.endStream { self.complete(context: context, streamID: streamID) }
    }

    private func receivedData(context: ChannelHandlerContext, streamID: HTTP2StreamID, data: HTTP2Frame.FramePayload.Data) {
        let length = HTTP2InboundWindow.flowControlledLength(payload: data.data.readableBytes, paddingBytes: data.paddingBytes)
        if self.configuration.http2.windowUpdatePerRequest {
            if length > 0 { self.write(context: context, HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: length))) }
        } else if let increment = self.receiveWindow.received(length) {
            self.write(context: context, HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment)))
        }
        guard var request = self.pending[streamID] else { return }  // refused, reset, or answered early
        request.bodyBytes += data.data.readableBytes
        self.pending[streamID] = request
        if data.endStream {
            self.complete(context: context, streamID: streamID)
        } else if request.bodyBytes > HTTP2RequestValidator.largestPayload {
            // Too large whatever follows: answer now and ask the client to stop sending (RFC 9113 §8.1).
            self.complete(context: context, streamID: streamID)
            self.answers.append(HTTP2Frame(streamID: streamID, payload: .rstStream(.noError)))
        }
    }

    // MARK: - Verdicts

    private func complete(context: ChannelHandlerContext, streamID: HTTP2StreamID) {
        guard let request = self.pending.removeValue(forKey: streamID) else { return }
        let fields = HTTP2RequestValidator.Request(headers: request.headers)
        let apnsID = fields.validAPNSID ?? self.identifiers.next()
        if let fault = self.fault() {
            self.answer(context: context, streamID: streamID, apnsID: apnsID, status: fault.status, reason: fault.reason, timestamp: nil)
            return
        }
        if self.certificateVerified == nil {
            // With optional verification a certificate that is present has been verified against
            // the client CA during the handshake; one that did not verify failed the handshake.
            self.certificateVerified = (try? context.pipeline.syncOperations.nioSSL_peerCertificate()) != nil
        }
        var authenticated = false
        let verdict = self.validator.validate(
            fields,
            bodyBytes: request.bodyBytes,
            certificateVerified: self.certificateVerified ?? false,
            now: self.configuration.http2.now(),
            authenticated: &authenticated
        )
        if authenticated, self.streamLimit < self.configuration.http2.maxConcurrentStreams {
            self.streamLimit = self.configuration.http2.maxConcurrentStreams
            let setting = HTTP2Setting(parameter: .maxConcurrentStreams, value: StreamLimitRewriter.encode(self.streamLimit))
            self.write(context: context, HTTP2Frame(streamID: .rootStream, payload: .settings(.settings([setting]))))
        }
        switch verdict {
        case .accepted(let fingerprint):
            self.fingerprints.append(fingerprint)
            self.answer(context: context, streamID: streamID, apnsID: apnsID, status: 200, reason: nil, timestamp: nil)
        case .rejected(let status, let reason, let timestamp):
            self.answer(context: context, streamID: streamID, apnsID: apnsID, status: status, reason: reason, timestamp: timestamp)
        }
    }

    /// The fault this stream gets, counting it gateway-wide, if faults are configured.
    private func fault() -> (status: Int, reason: HTTP2Reason)? {
        if let answer = self.outage.answer { return answer }
        guard self.faults.countsGatewayStreams else { return nil }
        let number = self.gatewayStreams.increment()
        func hits(_ every: Int?) -> Bool { every.map { $0 > 0 && number % $0 == 0 } ?? false }
        if hits(self.faults.serviceUnavailableEvery) { return (503, .serviceUnavailable) }
        if hits(self.faults.internalServerErrorEvery) { return (500, .internalServerError) }
        if hits(self.faults.tooManyRequestsEvery) { return (429, .tooManyRequests) }
        return nil
    }

    private func answer(context: ChannelHandlerContext, streamID: HTTP2StreamID, apnsID: String, status: Int, reason: HTTP2Reason?, timestamp: Int64?) {
        var headers = HPACKHeaders()
        headers.reserveCapacity(3)
        headers.add(name: ":status", value: String(status))
        headers.add(name: "apns-id", value: apnsID)
        guard let reason else {
            self.answers.append(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: true))))
            self.answerCount += 1
            return
        }
        self.rejections[reason.rawValue, default: 0] += 1
        headers.add(name: "content-type", value: "application/json")
        let body = Self.errorBody(reason, timestamp: timestamp, allocator: context.channel.allocator)
        self.answers.append(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers))))
        self.answers.append(HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(body), endStream: true))))
        self.answerCount += 1
    }

    // MARK: - Writing

    private func write(context: ChannelHandlerContext, _ frame: HTTP2Frame) {
        context.write(self.wrapOutboundOut(frame), promise: nil)
        self.wroteSinceFlush = true
    }

    /// Writes this read burst's answers now, or after the answer delay in one flush of their own.
    private func writeAnswers(context: ChannelHandlerContext) {
        let frames = self.answers
        let count = self.answerCount
        self.answers.removeAll(keepingCapacity: true)
        self.answerCount = 0
        guard let delay = self.faults.answerDelay else {
            self.writeInOrder(context: context, frames)
            self.wroteSinceFlush = true
            self.unanswered -= count
            return
        }
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: delay) {
            let (handler, context) = loopBound.value
            guard !handler.closing else { return }
            handler.writeInOrder(context: context, frames)
            handler.coalescer.flushBatch(from: context)
            handler.unanswered -= count
            handler.closeIfDone(context: context)
        }
    }

    /// Writes answer frames so that they leave in the order given: `NIOHTTP2Handler` sends the DATA
    /// frames of one flush in no particular order, so each is flushed out of it at once, and
    /// ``HTTP2WriteCoalescer`` holds the bytes until the caller's `flushBatch(from:)`.
    ///
    /// With ``MockAPNSConfiguration/HTTP2Options/flushEachFrame`` every frame leaves at once, in a
    /// TLS record of its own.
    private func writeInOrder(context: ChannelHandlerContext, _ frames: [HTTP2Frame]) {
        if self.configuration.http2.flushEachFrame {
            for frame in frames {
                context.write(self.wrapOutboundOut(frame), promise: nil)
                self.coalescer.flushBatch(from: context)
            }
            return
        }
        self.coalescer.holdFlushes()
        for frame in frames {
            context.write(self.wrapOutboundOut(frame), promise: nil)
            if case .data = frame.payload { context.flush() }
        }
    }

    /// After the last stream a GOAWAY lets through is answered: sends the GOAWAY (NO_ERROR, APNs'
    /// JSON reason) and closes once it is written.
    private func closeIfDone(context: ChannelHandlerContext) {
        guard let lastStreamID = self.goAwayLastStreamID, self.unanswered == 0 else { return }
        self.goAway(context: context, lastStreamID: lastStreamID, reason: .shutdown, cause: "goaway")
    }

    /// Closes the connection if no request started on it for the idle timeout and none is
    /// unanswered; otherwise looks again when the timeout could next be reached.
    private func scheduleIdleCheck(context: ChannelHandlerContext) {
        guard let timeout = self.configuration.http2.idleTimeout, !self.closing else { return }
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        self.idleCheck = context.eventLoop.scheduleTask(deadline: self.lastRequestStarted + timeout) {
            let (handler, context) = loopBound.value
            handler.idleCheck = nil
            if handler.unanswered == 0, NIODeadline.now() >= handler.lastRequestStarted + timeout {
                handler.goAway(context: context, lastStreamID: handler.lastStreamID, reason: .idleTimeout, cause: "idle-timeout")
            } else {
                if handler.unanswered > 0 { handler.lastRequestStarted = .now() }
                handler.scheduleIdleCheck(context: context)
            }
        }
    }

    /// Sends GOAWAY (NO_ERROR, `{"reason":"…"}`) naming `lastStreamID` and closes once it is written.
    private func goAway(context: ChannelHandlerContext, lastStreamID: HTTP2StreamID, reason: HTTP2Reason, cause: String) {
        guard !self.closing else { return }
        self.closing = true
        self.idleCheck?.cancel()
        self.ledger.recordClose(cause)
        let debugData = Self.errorBody(reason, timestamp: nil, allocator: context.channel.allocator)
        let frame = HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: lastStreamID, errorCode: .noError, opaqueData: debugData))
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(self.wrapOutboundOut(frame)).whenComplete { _ in loopBound.value.close(promise: nil) }
    }

    /// APNs' JSON error body, `{"reason":"…"}` with `"timestamp"` for 410; GOAWAY carries it too.
    private static func errorBody(_ reason: HTTP2Reason, timestamp: Int64?, allocator: ByteBufferAllocator) -> ByteBuffer {
        var body = allocator.buffer(capacity: 48 + reason.rawValue.utf8.count)
        body.writeString("{\"reason\":\"\(reason.rawValue)\"")
        if let timestamp { body.writeString(",\"timestamp\":\(timestamp)") }
        body.writeString("}")
        return body
    }

    private func flushLedger() {
        if !self.fingerprints.isEmpty {
            self.ledger.recordAccepted(fingerprints: self.fingerprints)
            self.fingerprints.removeAll(keepingCapacity: true)
        }
        if !self.rejections.isEmpty {
            self.ledger.recordRejected(counts: self.rejections)
            self.rejections.removeAll(keepingCapacity: true)
        }
    }
}
