import APNSWire
import Logging
import NIOCore
import PushFleetCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Serves one connection of the binary gateway as APNs did: accepts silently, answers the first bad
/// notification with an error response after the configured delay and closes, and reads and
/// discards everything that arrives after the bad notification.
///
/// The channel runs with auto-read off: this handler asks for each read, which is how the
/// per-connection rate limit slows the sender down (TCP back-pressure, as from a busy gateway).
final class BinaryGatewayHandler: ChannelInboundHandler {
    typealias InboundIn = BinaryInboundMessage
    typealias OutboundOut = ByteBuffer

    private enum State {
        case accepting
        /// A bad notification was seen; the error response goes out after the delay.
        case failing
        case closed
    }

    private let ledger: DeliveryLedger
    private let feedback: FeedbackStore
    private let errorDelay: TimeAmount
    private let stall: GatewayStall
    private let faults: MockAPNSConfiguration.BinaryFaults
    private let acceptedByGateway: AcceptedCounter
    private let logger: Logger
    private var validator: BinaryNotificationValidator
    private var state = State.accepting
    private var acceptedSinceRead = 0
    private var fingerprints: [UInt64] = []
    /// Accepted payloads' digests, when the simulator records them.
    private let recordPayloads: Bool
    private var payloads: [(fingerprint: UInt64, digest: UInt64)] = []
    private var nextReadAllowed = NIODeadline.uptimeNanoseconds(0)

    init(
        configuration: MockAPNSConfiguration, refusedTokens: RefusedTokens, ledger: DeliveryLedger, feedback: FeedbackStore, acceptedByGateway: AcceptedCounter,
        stall: GatewayStall, logger: Logger
    ) {
        self.ledger = ledger
        self.acceptedByGateway = acceptedByGateway
        self.feedback = feedback
        self.errorDelay = configuration.errorDelay
        self.stall = stall
        self.faults = configuration.binaryFaults
        self.recordPayloads = configuration.recordPayloads
        self.logger = logger
        self.validator = BinaryNotificationValidator(refusedTokens: refusedTokens)
        self.fingerprints.reserveCapacity(512)
    }

    func channelActive(context: ChannelHandlerContext) {
        self.ledger.recordConnection("binary")
        context.read()
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .accepting = self.state else { return }  // after an error: read and discard
        switch self.unwrapInboundIn(data) {
        case .unparseable(let identifier, let reason):
            self.logger.debug("unparseable notification", metadata: ["reason": "\(reason)"])
            self.fail(context: context, status: .protocolError, identifier: identifier, silently: false)
        case .notification(let notification):
            switch self.validator.validate(notification) {
            case .accepted(let fingerprint, let unregistered):
                if self.recordPayloads {
                    self.payloads.append((fingerprint, DeliveryLedger.digest(notification.payload?.readableBytesView ?? ByteBuffer().readableBytesView)))
                }
                self.accept(context: context, fingerprint: fingerprint, unregistered: unregistered, identifier: notification.identifier)
            case .rejected(let status):
                // Command 0 carries no identifier: APNs just closed the connection.
                self.fail(context: context, status: status, identifier: notification.identifier, silently: notification.command == 0)
            }
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.flushLedger()
        switch self.state {
        case .closed:
            break
        case .failing:
            context.read()
        case .accepting:
            self.scheduleNextRead(context: context)
        }
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.flushLedger()
        self.state = .closed
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.logger.debug("binary gateway connection error", metadata: ["error": "\(error)"])
        self.flushLedger()
        self.state = .closed
        context.close(promise: nil)
    }

    // MARK: - Verdicts

    private func accept(context: ChannelHandlerContext, fingerprint: UInt64, unregistered: DeviceToken?, identifier: UInt32) {
        self.fingerprints.append(fingerprint)
        self.acceptedSinceRead += 1
        if let unregistered {
            self.feedback.add(unregistered, timestamp: UInt32(truncatingIfNeeded: NIODeadline.wallClockSeconds()))
        }
        guard self.faults.dropEvery != nil || self.faults.shutdownEvery != nil else { return }
        let total = self.acceptedByGateway.increment()
        if let every = self.faults.dropEvery, every > 0, total % every == 0 {
            self.flushLedger()
            self.state = .closed
            self.ledger.recordClose("drop")
            context.close(promise: nil)
        } else if let every = self.faults.shutdownEvery, every > 0, total % every == 0 {
            self.flushLedger()
            self.state = .failing
            self.ledger.recordClose("shutdown")
            self.respondLater(context: context, response: BinaryErrorResponse(status: .shutdown, identifier: identifier))
        }
    }

    private func fail(context: ChannelHandlerContext, status: BinaryStatus, identifier: UInt32, silently: Bool) {
        self.flushLedger()
        self.state = .failing
        self.ledger.recordRejected(reason: status.reason.rawValue)
        self.ledger.recordClose("error")
        self.respondLater(context: context, response: silently ? nil : BinaryErrorResponse(status: status, identifier: identifier))
    }

    /// Writes `response` (if any) after the error delay and any stall, then closes.
    private func respondLater(context: ChannelHandlerContext, response: BinaryErrorResponse?) {
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        self.stall.schedule(on: context.eventLoop, at: .now() + self.errorDelay) {
            let (handler, context) = loopBound.value
            // A client that gave up waiting has closed the connection: the answer goes nowhere.
            guard case .failing = handler.state else { return }
            handler.state = .closed
            if let response {
                var buffer = context.channel.allocator.buffer(capacity: BinaryErrorResponse.byteCount)
                response.write(into: &buffer)
                context.writeAndFlush(handler.wrapOutboundOut(buffer)).whenComplete { _ in loopBound.value.1.close(promise: nil) }
            } else {
                context.close(promise: nil)
            }
        }
    }

    // MARK: - Reading and the ledger

    private func flushLedger() {
        guard !self.fingerprints.isEmpty else { return }
        self.ledger.recordAccepted(fingerprints: self.fingerprints)
        self.fingerprints.removeAll(keepingCapacity: true)
        self.ledger.recordPayloads(self.payloads)
        self.payloads.removeAll(keepingCapacity: true)
    }

    private func scheduleNextRead(context: ChannelHandlerContext) {
        guard let rate = self.faults.ratePerConnection, rate > 0 else {
            context.read()
            return
        }
        let now = NIODeadline.now()
        let cost = TimeAmount.nanoseconds(Int64(self.acceptedSinceRead) * 1_000_000_000 / Int64(rate))
        self.acceptedSinceRead = 0
        self.nextReadAllowed = max(self.nextReadAllowed, now) + cost
        if self.nextReadAllowed <= now {
            context.read()
        } else {
            let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(deadline: self.nextReadAllowed) { loopBound.value.read() }
        }
    }
}

extension NIODeadline {
    /// Seconds since 1970 by the wall clock, for feedback timestamps.
    static func wallClockSeconds() -> Int {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return spec.tv_sec
    }
}

/// Notifications accepted by the whole gateway, for faults that fire every N of them.
final class AcceptedCounter: Sendable {
    private let value = Atomic<Int>(0)

    /// Adds one and returns the new total.
    func increment() -> Int {
        self.value.add(1, ordering: .relaxed).newValue
    }
}
