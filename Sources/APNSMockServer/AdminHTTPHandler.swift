import NIOCore
import NIOHTTP1

/// The simulator's admin endpoint on plain HTTP: `GET /stats` returns the ledger as JSON,
/// `POST /reset` (or `GET /reset`) clears the ledger and the feedback list.
final class AdminHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let ledger: DeliveryLedger
    private let feedback: FeedbackStore
    private var request: HTTPRequestHead?

    init(ledger: DeliveryLedger, feedback: FeedbackStore) {
        self.ledger = ledger
        self.feedback = feedback
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.request = head
        case .body:
            break
        case .end:
            guard let head = self.request else { return }
            self.request = nil
            let (status, body) = self.respond(to: head)
            var headers = HTTPHeaders()
            headers.add(name: "content-type", value: "application/json")
            headers.add(name: "content-length", value: String(body.utf8.count))
            let keepAlive = head.isKeepAlive
            if !keepAlive { headers.add(name: "connection", value: "close") }
            context.write(self.wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
            context.write(self.wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: body)))), promise: nil)
            let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.writeAndFlush(self.wrapOutboundOut(.end(nil))).whenComplete { _ in
                if !keepAlive { loopBound.value.close(promise: nil) }
            }
        }
    }

    private func respond(to head: HTTPRequestHead) -> (HTTPResponseStatus, String) {
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
        switch (head.method, path) {
        case (.GET, "/stats"):
            return (.ok, Self.json(self.ledger.snapshot(), feedbackPending: self.feedback.count) + "\n")
        case (.POST, "/reset"), (.GET, "/reset"):
            self.ledger.reset()
            self.feedback.reset()
            return (.ok, "{\"reset\":true}\n")
        default:
            return (.notFound, "{\"error\":\"unknown path \(path); try GET /stats or POST /reset\"}\n")
        }
    }

    static func json(_ snapshot: DeliveryLedger.Snapshot, feedbackPending: Int) -> String {
        func object(_ dictionary: [String: Int]) -> String {
            "{" + dictionary.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + "}"
        }
        return "{\"accepted\":\(snapshot.accepted),\"distinct_tokens\":\(snapshot.distinctTokens),"
            + "\"duplicated_tokens\":\(snapshot.duplicatedTokens),\"duplicate_deliveries\":\(snapshot.duplicateDeliveries),"
            + "\"rejected\":\(object(snapshot.rejected)),\"connections\":\(object(snapshot.connections)),"
            + "\"closes\":\(object(snapshot.closes)),\"pings\":\(snapshot.pings),\"feedback_pending\":\(feedbackPending),"
            + "\"ledger_memory_bytes\":\(snapshot.memoryBytes)}"
    }
}
