import APNSWire
import Logging
import NIOCore
import NIOSSL
import PushFleetCore

/// Serves one connection of the HTTP/2 provider API over TLS, framed by ``HTTP2ServerFramer``:
/// collects each stream's headers and body until END_STREAM, judges it with
/// ``HTTP2RequestValidator``, and answers on the stream. A read burst's answers are written together
/// in `channelReadComplete`, after its verdicts are in the ledger, with one flush: a client never
/// sees a 200 the ledger does not hold yet.
///
/// It also enforces the stream limit it advertised (1 until a request authenticates; a stream
/// beyond it is refused with RST_STREAM REFUSED_STREAM, as APNs does), keeps the connection's
/// flow-control window open, and injects the configured ``MockAPNSConfiguration/HTTP2Faults``.
/// With an idle timeout configured, a connection on which no request started for that long gets
/// `GOAWAY` `{"reason":"IdleTimeout"}` and is closed.
final class HTTP2GatewayHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// What this gateway announces: one stream until a request authenticates, HTTP/2's default
    /// stream window (request bodies are at most 5 KB), the default frame size, and APNs' header
    /// list limit.
    static let settings = [
        HTTP2SettingValue(HTTP2Wire.Setting.maxConcurrentStreams, 1),
        HTTP2SettingValue(HTTP2Wire.Setting.initialWindowSize, 65_535),
        HTTP2SettingValue(HTTP2Wire.Setting.maxFrameSize, 16_384),
        HTTP2SettingValue(HTTP2Wire.Setting.maxHeaderListSize, 8_000),
    ]

    /// A request stream whose END_STREAM has not arrived yet.
    private struct PendingRequest {
        var fields: [HTTP2HeaderField]
        /// Its device token, read ahead.
        var token: HTTP2RequestValidator.PreparedToken?
        var bodyBytes = 0
        /// The body's digest, kept when the simulator records payloads.
        var digest = PayloadDigest()
    }

    /// An answer decided and not yet written.
    private struct Answer {
        var streamID: Int32
        var status: Int
        var apnsID: String
        var body: ByteBuffer?
        /// RST_STREAM NO_ERROR after it: the request was answered before its body ended.
        var resetAfter = false
    }

    private let configuration: MockAPNSConfiguration
    private let faults: MockAPNSConfiguration.HTTP2Faults
    private let ledger: DeliveryLedger
    private let outage: GatewayOutage
    private let stall: GatewayStall
    private let gatewayStreams: AcceptedCounter
    private let logger: Logger
    private let allocator: ByteBufferAllocator
    private var framer: HTTP2ServerFramer
    /// Bytes read and not yet a whole frame.
    private var inbound = ByteBuffer()
    /// The framer's events of one read (kept for its storage).
    private var events: [HTTP2ServerFramer.Event] = []
    private var validator: HTTP2RequestValidator
    private var identifiers = APNSIdentifier()
    private var pending: [Int32: PendingRequest] = [:]
    /// Streams processed and not answered yet (pending, or waiting for the answer delay).
    private var unanswered = 0
    private var streamLimit = 1
    private var streamsOnConnection = 0
    private var goAwayLastStreamID: Int32? = nil
    /// The first GOAWAY of a shutdown in two steps is out; the PING sent with it is unanswered.
    private var awaitingShutdownPing = false
    /// The highest stream processed, which an idle-timeout GOAWAY names.
    private var lastStreamID: Int32 = 0
    private var lastRequestStarted: NIODeadline = .now()
    private var idleCheck: Scheduled<Void>? = nil
    private var certificateVerified: Bool? = nil
    private var windowOpened = false
    private var receiveWindow: HTTP2InboundWindow
    /// This read burst's answers, written in `channelReadComplete` (or after the answer delay).
    private var answers: [Answer] = []
    private var fingerprints: [UInt64] = []
    /// Accepted payloads' digests, when the simulator records them.
    private var payloads: [(fingerprint: UInt64, digest: UInt64)] = []
    /// Rejections since the last flush, by reason: a handful of reasons, so a list, not a hashed map.
    private var rejections: [(reason: RejectionReason, count: Int)] = []
    /// Error bodies written lately, shared by the answers that carry the same one: nearly all of a
    /// stale audience's are alike (a 410's timestamp is the millisecond).
    private var recentBodies: [(reason: RejectionReason, timestamp: Int64?, body: ByteBuffer)] = []
    private var closing = false
    /// The device tokens of one read's requests, read ahead: one slot per event (kept for its
    /// storage).
    private var tokens: [HTTP2RequestValidator.PreparedToken?] = []

    init(
        configuration: MockAPNSConfiguration,
        refusedTokens: RefusedTokens,
        keys: [String: MockAPNSConfiguration.ProviderKey],
        ledger: DeliveryLedger,
        gatewayStreams: AcceptedCounter,
        outage: GatewayOutage,
        stall: GatewayStall,
        logger: Logger,
        allocator: ByteBufferAllocator
    ) {
        self.configuration = configuration
        self.faults = configuration.http2Faults
        self.ledger = ledger
        self.gatewayStreams = gatewayStreams
        self.outage = outage
        self.stall = stall
        self.logger = logger
        self.allocator = allocator
        self.framer = HTTP2ServerFramer(settings: Self.settings, allocator: allocator)
        self.validator = HTTP2RequestValidator(refusedTokens: refusedTokens, allowedTopics: configuration.http2.allowedTopics, keys: keys)
        self.receiveWindow = HTTP2InboundWindow(target: configuration.http2.connectionWindow)
        self.fingerprints.reserveCapacity(256)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        // Written once TLS is up: NIOSSL holds writes until its handshake completes.
        self.framer.start()
        if context.channel.isActive { self.flush(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        self.ledger.recordConnection("http2")
        self.flush(context: context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // After GOAWAY (or a connection error) only the close is left to do.
        guard !self.closing else { return }
        var bytes = self.unwrapInboundIn(data)
        if self.inbound.readableBytes == 0 {
            self.inbound = bytes
        } else {
            self.inbound.writeBuffer(&bytes)
        }
        // The events are handled once the read is: handling one writes to the framer. This read's
        // requests have their device tokens looked up together, so that the lookups' cache misses
        // overlap.
        var events = self.events
        var tokens = self.tokens
        self.events = []
        self.tokens = []
        defer {
            events.removeAll(keepingCapacity: true)
            tokens.removeAll(keepingCapacity: true)
            self.events = events
            self.tokens = tokens
        }
        let failure: HTTP2ConnectionError?
        do {
            try self.framer.read(&self.inbound) { events.append($0) }
            failure = nil
        } catch {
            failure = error
        }
        self.validator.prepareTokens(events, into: &tokens)
        assert(tokens.count == events.count, "one token slot per event")
        for (event, token) in zip(events, tokens) { self.handle(context: context, event, token: token) }
        if let failure { self.fail(context: context, failure) }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.flushLedger()
        if !self.answers.isEmpty { self.writeAnswers(context: context) }
        self.flush(context: context)
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
        self.logger.debug("http2 gateway error", metadata: ["error": "\(error)"])
        self.closing = true
        self.idleCheck?.cancel()
        context.close(promise: nil)
    }

    /// A connection error: GOAWAY with its code, then the close.
    private func fail(context: ChannelHandlerContext, _ error: HTTP2ConnectionError) {
        self.logger.debug("http2 gateway connection error", metadata: ["error": "\(error)"])
        guard !self.closing else { return }
        self.closing = true
        self.idleCheck?.cancel()
        self.flushLedger()
        self.framer.fail(error)
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        self.flush(context: context) { loopBound.value.close(promise: nil) }
    }

    /// Writes and flushes what the framer has, then calls `then` once it is written.
    private func flush(context: ChannelHandlerContext, then: (() -> Void)? = nil) {
        guard let bytes = self.framer.take() else {
            then?()
            return
        }
        guard let then else {
            context.writeAndFlush(self.wrapOutboundOut(bytes), promise: nil)
            return
        }
        // The write completes on this event loop, where `then` belongs.
        let loopBound = NIOLoopBound(then, eventLoop: context.eventLoop)
        context.writeAndFlush(self.wrapOutboundOut(bytes)).whenComplete { _ in loopBound.value() }
    }

    /// - Parameter token: a HEADERS event's device token, read ahead (see
    ///   ``HTTP2RequestValidator/prepareTokens(_:into:)``).
    private func handle(context: ChannelHandlerContext, _ event: HTTP2ServerFramer.Event, token: HTTP2RequestValidator.PreparedToken?) {
        if !self.windowOpened {
            // The client's SETTINGS came first: its preface is in, so the window may grow now, and
            // the connection counts as idle from here (a slow TLS handshake is not idleness).
            self.windowOpened = true
            self.lastRequestStarted = .now()
            self.scheduleIdleCheck(context: context)
            if let increment = self.receiveWindow.initialIncrement { self.framer.windowUpdate(increment) }
        }
        switch event {
        case .headers(let streamID, let fields, let endStream):
            self.receivedHeaders(context: context, streamID: streamID, fields: fields, token: token, endStream: endStream)
        case .data(let streamID, let payload, let flowControlledLength, let endStream):
            self.receivedData(context: context, streamID: streamID, payload: payload, flowControlledLength: flowControlledLength, endStream: endStream)
        case .reset(let streamID):
            if self.pending.removeValue(forKey: streamID) != nil { self.unanswered -= 1 }
        case .ping:
            self.ledger.recordPing()
        case .pingAnswered:
            if self.awaitingShutdownPing {
                // The client has read the first GOAWAY: what it opened before is all in.
                self.awaitingShutdownPing = false
                self.goAwayLastStreamID = self.lastStreamID
            }
        case .goAway:
            break
        }
    }

    // MARK: - Frames

    private func receivedHeaders(
        context: ChannelHandlerContext, streamID: Int32, fields: [HTTP2HeaderField], token: HTTP2RequestValidator.PreparedToken?, endStream: Bool
    ) {
        if let last = self.goAwayLastStreamID, streamID > last { return }
        if self.pending[streamID] != nil {
            // Trailers: nothing in them matters, but they end the stream.
            if endStream { self.complete(context: context, streamID: streamID) }
            return
        }
        guard self.unanswered < self.streamLimit else {
            self.framer.reset(streamID: streamID, errorCode: HTTP2Wire.ErrorCode.refusedStream)
            return
        }
        self.pending[streamID] = PendingRequest(fields: fields, token: token)
        self.unanswered += 1
        self.streamsOnConnection += 1
        self.lastStreamID = streamID
        if self.configuration.http2.idleTimeout != nil { self.lastRequestStarted = .now() }
        if let after = self.faults.goAwayAfter, after > 0, self.streamsOnConnection == after {
            if self.faults.goAwayInTwoSteps {
                self.framer.goAway(
                    lastStreamID: .max, errorCode: HTTP2Wire.ErrorCode.noError, debugData: Self.errorBody(.shutdown, timestamp: nil, allocator: self.allocator)
                )
                self.framer.ping()
                self.awaitingShutdownPing = true
            } else {
                // Streams above this one are ignored from now on. The GOAWAY goes out once every
                // stream up to here is answered, just before the close.
                self.goAwayLastStreamID = streamID
            }
        }
        if endStream { self.complete(context: context, streamID: streamID) }
    }

    private func receivedData(context: ChannelHandlerContext, streamID: Int32, payload: ByteBuffer, flowControlledLength: Int, endStream: Bool) {
        if self.configuration.http2.windowUpdatePerRequest {
            if flowControlledLength > 0 { self.framer.windowUpdate(flowControlledLength) }
        } else if let increment = self.receiveWindow.received(flowControlledLength) {
            self.framer.windowUpdate(increment)
        }
        guard var request = self.pending[streamID] else { return }  // refused, reset, or answered early
        request.bodyBytes += payload.readableBytes
        if self.configuration.recordPayloads { request.digest.add(payload.readableBytesView) }
        self.pending[streamID] = request
        if endStream {
            self.complete(context: context, streamID: streamID)
        } else if request.bodyBytes > HTTP2RequestValidator.largestPayload {
            // Too large whatever follows: answer now and ask the client to stop sending (RFC 9113 §8.1).
            self.complete(context: context, streamID: streamID)
            self.answers[self.answers.count - 1].resetAfter = true
        }
    }

    // MARK: - Verdicts

    private func complete(context: ChannelHandlerContext, streamID: Int32) {
        guard let request = self.pending.removeValue(forKey: streamID) else { return }
        let fields = HTTP2RequestValidator.Request(fields: request.fields)
        let apnsID = fields.validAPNSID ?? self.identifiers.next()
        if let fault = self.fault() {
            self.answer(streamID: streamID, apnsID: apnsID, status: fault.status, reason: fault.reason, timestamp: nil)
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
            prepared: request.token,
            bodyBytes: request.bodyBytes,
            certificateVerified: self.certificateVerified ?? false,
            now: self.configuration.http2.now(),
            authenticated: &authenticated
        )
        if authenticated, self.streamLimit < self.configuration.http2.maxConcurrentStreams {
            self.streamLimit = self.configuration.http2.maxConcurrentStreams
            self.framer.announce(maxConcurrentStreams: self.streamLimit)
        }
        switch verdict {
        case .accepted(let fingerprint):
            self.fingerprints.append(fingerprint)
            if self.configuration.recordPayloads { self.payloads.append((fingerprint, request.digest.value)) }
            self.answer(streamID: streamID, apnsID: apnsID, status: 200, reason: nil, timestamp: nil)
        case .rejected(let status, let reason, let timestamp):
            self.answer(streamID: streamID, apnsID: apnsID, status: status, reason: reason, timestamp: timestamp)
        }
    }

    /// The fault this stream gets, counting it gateway-wide, if faults are configured.
    private func fault() -> (status: Int, reason: RejectionReason)? {
        if let answer = self.outage.answer { return answer }
        guard self.faults.countsGatewayStreams else { return nil }
        let number = self.gatewayStreams.increment()
        func hits(_ every: Int?) -> Bool { every.map { $0 > 0 && number % $0 == 0 } ?? false }
        if hits(self.faults.serviceUnavailableEvery) { return (503, .serviceUnavailable) }
        if hits(self.faults.internalServerErrorEvery) { return (500, .internalServerError) }
        if hits(self.faults.tooManyRequestsEvery) { return (429, .tooManyRequests) }
        return nil
    }

    private func answer(streamID: Int32, apnsID: String, status: Int, reason: RejectionReason?, timestamp: Int64?) {
        var answer = Answer(streamID: streamID, status: status, apnsID: apnsID)
        if let reason {
            if let index = self.rejections.firstIndex(where: { $0.reason == reason }) {
                self.rejections[index].count += 1
            } else {
                self.rejections.append((reason, 1))
            }
            answer.body = self.errorBody(reason, timestamp: timestamp)
        }
        self.answers.append(answer)
    }

    /// The error body for `reason` and `timestamp`: one written lately, or a new one.
    private func errorBody(_ reason: RejectionReason, timestamp: Int64?) -> ByteBuffer {
        if let index = self.recentBodies.firstIndex(where: { $0.reason == reason && $0.timestamp == timestamp }) {
            return self.recentBodies[index].body
        }
        // Few reasons, and a timestamp that moves on: the list stays short.
        if self.recentBodies.count >= 8 { self.recentBodies.removeAll(keepingCapacity: true) }
        let body = Self.errorBody(reason, timestamp: timestamp, allocator: self.allocator)
        self.recentBodies.append((reason, timestamp, body))
        return body
    }

    // MARK: - Writing

    /// Writes this read burst's answers now, or in one flush of their own after the answer delay
    /// and any stall.
    private func writeAnswers(context: ChannelHandlerContext) {
        let answers = self.answers
        self.answers.removeAll(keepingCapacity: true)
        let delay = self.faults.answerDelay
        guard delay != nil || self.stall.isOn else {
            self.write(context: context, answers)
            return
        }
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        self.stall.schedule(on: context.eventLoop, at: .now() + (delay ?? .zero)) {
            let (handler, context) = loopBound.value
            guard !handler.closing else { return }
            handler.write(context: context, answers)
            handler.flush(context: context)
            handler.closeIfDone(context: context)
        }
    }

    /// Writes answers in the order given. With ``MockAPNSConfiguration/HTTP2Options/flushEachFrame``
    /// every frame leaves at once, in a TLS record of its own.
    private func write(context: ChannelHandlerContext, _ answers: [Answer]) {
        let eachFrame = self.configuration.http2.flushEachFrame
        for answer in answers {
            if eachFrame {
                self.framer.writeAnswerHeaders(streamID: answer.streamID, status: answer.status, apnsID: answer.apnsID, hasBody: answer.body != nil)
                self.flush(context: context)
                if let body = answer.body {
                    self.framer.writeAnswerBody(streamID: answer.streamID, body)
                    self.flush(context: context)
                }
            } else {
                self.framer.writeAnswer(streamID: answer.streamID, status: answer.status, apnsID: answer.apnsID, body: answer.body)
            }
            if answer.resetAfter { self.framer.reset(streamID: answer.streamID, errorCode: HTTP2Wire.ErrorCode.noError) }
        }
        self.unanswered -= answers.count
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
    private func goAway(context: ChannelHandlerContext, lastStreamID: Int32, reason: RejectionReason, cause: String) {
        guard !self.closing else { return }
        self.closing = true
        self.idleCheck?.cancel()
        self.ledger.recordClose(cause)
        self.framer.goAway(lastStreamID: lastStreamID, errorCode: HTTP2Wire.ErrorCode.noError, debugData: Self.errorBody(reason, timestamp: nil, allocator: self.allocator))
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        self.flush(context: context) { loopBound.value.close(promise: nil) }
    }

    /// APNs' JSON error body, `{"reason":"…"}` with `"timestamp"` for 410; GOAWAY carries it too.
    private static func errorBody(_ reason: RejectionReason, timestamp: Int64?, allocator: ByteBufferAllocator) -> ByteBuffer {
        var body = allocator.buffer(capacity: 48 + reason.rawValue.utf8.count)
        body.writeStaticString("{\"reason\":\"")
        body.writeString(reason.rawValue)
        body.writeStaticString("\"")
        if let timestamp {
            body.writeStaticString(",\"timestamp\":")
            body.writeString(String(timestamp))
        }
        body.writeStaticString("}")
        return body
    }

    private func flushLedger() {
        if !self.fingerprints.isEmpty {
            self.ledger.recordAccepted(fingerprints: self.fingerprints)
            self.fingerprints.removeAll(keepingCapacity: true)
            self.ledger.recordPayloads(self.payloads)
            self.payloads.removeAll(keepingCapacity: true)
        }
        if !self.rejections.isEmpty {
            self.ledger.recordRejected(counts: self.rejections.map { ($0.reason.rawValue, $0.count) })
            self.rejections.removeAll(keepingCapacity: true)
        }
    }
}
