public import NIOCore

/// Sits between the TLS handler and `NIOHTTP2Handler` and turns a batch of HTTP/2 writes into one
/// buffer, one TLS write and one flush. Two costs of the plain pipeline go away:
///
/// - `NIOHTTP2Handler` writes each frame (and a DATA frame's payload) as a buffer of its own, and
///   the TLS handler makes every buffer a TLS record: three records per notification.
/// - `NIOHTTP2Handler` emits the DATA frames written before one flush in the hash order of their
///   stream ids. The peer then completes streams out of order, and both ends remove stream state
///   from the middle of their ordered stream maps, which costs O(open streams) per stream. Flushing
///   `NIOHTTP2Handler` after every request keeps DATA in stream order; between ``holdFlushes()``
///   and ``flushBatch(from:)`` this handler keeps those flushes from reaching the socket.
///
/// Bytes reach the network at the first flush that is not held, exactly as they would have at the
/// next flush without this handler. Unflushed writes fail when the channel closes.
public final class HTTP2WriteCoalescer: ChannelOutboundHandler, RemovableChannelHandler {
    public typealias OutboundIn = IOData
    public typealias OutboundOut = IOData

    private var isHoldingFlushes = false
    /// The bytes written since the last flush.
    private var pending: ByteBuffer? = nil
    /// The last batch's storage. The TLS handler holds it until its flush has encrypted it, so it
    /// is cleared (and then, being unique again, reused without an allocation) only at the next
    /// write.
    private var spare: ByteBuffer? = nil
    private var promises: [EventLoopPromise<Void>] = []
    private var context: ChannelHandlerContext? = nil

    public init() {}

    /// From now until ``flushBatch(from:)``, flushes from the handlers above are not passed on.
    /// Call on the channel's event loop.
    public func holdFlushes() {
        self.isHoldingFlushes = true
    }

    /// Ends the batch: flushes the handlers above through `above` (a context above this handler),
    /// then sends everything written since the last flush in one write. Ending the hold and
    /// flushing here, not only through `above`, matters: `NIOHTTP2Handler` passes a flush on only if
    /// it wrote a frame since its last one, and the held flushes were its last.
    /// Call on the channel's event loop.
    public func flushBatch(from above: ChannelHandlerContext) {
        above.flush()
        self.isHoldingFlushes = false
        guard let context = self.context, self.pending != nil else { return }
        self.writePending(context: context)
        context.flush()
    }

    public func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch self.unwrapOutboundIn(data) {
        case .byteBuffer(let bytes):
            if self.pending == nil {
                if var spare = self.spare {
                    self.spare = nil
                    spare.clear()
                    self.pending = spare
                } else {
                    self.pending = context.channel.allocator.buffer(capacity: max(bytes.readableBytes, 16_384))
                }
            }
            self.pending!.writeImmutableBuffer(bytes)
            if let promise { self.promises.append(promise) }
        case .fileRegion:
            // Never written by NIOHTTP2Handler; keep the order if it ever is.
            self.writePending(context: context)
            context.write(data, promise: promise)
        }
    }

    public func flush(context: ChannelHandlerContext) {
        guard !self.isHoldingFlushes else { return }
        self.writePending(context: context)
        context.flush()
    }

    public func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if mode != .input { self.failPending() }
        context.close(mode: mode, promise: promise)
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        self.failPending()
        self.context = nil
    }

    private func writePending(context: ChannelHandlerContext) {
        guard let bytes = self.pending else { return }
        let promise: EventLoopPromise<Void>?
        switch self.promises.count {
        case 0: promise = nil
        case 1: promise = self.promises[0]
        default:
            let combined = context.eventLoop.makePromise(of: Void.self)
            for waiting in self.promises { combined.futureResult.cascade(to: waiting) }
            promise = combined
        }
        self.promises.removeAll(keepingCapacity: true)
        self.pending = nil
        context.write(self.wrapOutboundOut(.byteBuffer(bytes)), promise: promise)
        self.spare = bytes
    }

    private func failPending() {
        self.pending = nil
        self.spare = nil
        let promises = self.promises
        self.promises.removeAll()
        for promise in promises { promise.fail(ChannelError.ioOnClosedChannel) }
    }
}
