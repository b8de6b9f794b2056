import NIOCore
import NIOHTTP1
import PushFleetCore

/// The simulator's admin endpoint on plain HTTP: `GET /stats` returns the ledger as JSON,
/// `POST /reset` (or `GET /reset`) clears the ledger and the feedback list, `POST /outage?status=503`
/// (or 500, 429) starts an APNs outage on the HTTP/2 gateway and `DELETE /outage` ends it, and
/// `POST /stall` makes both gateways hold every answer until `DELETE /stall`.
final class AdminHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let ledger: DeliveryLedger
    private let feedback: FeedbackStore
    private let outage: GatewayOutage
    private let stall: GatewayStall
    private var request: HTTPRequestHead?

    init(ledger: DeliveryLedger, feedback: FeedbackStore, outage: GatewayOutage, stall: GatewayStall) {
        self.ledger = ledger
        self.feedback = feedback
        self.outage = outage
        self.stall = stall
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
        let parts = head.uri.split(separator: "?", maxSplits: 1)
        let path = parts.first.map(String.init) ?? head.uri
        let query = parts.count > 1 ? String(parts[1]) : ""
        switch (head.method, path) {
        case (.GET, "/stats"):
            return (.ok, Self.json(self.ledger.snapshot(), feedbackPending: self.feedback.count) + "\n")
        case (.POST, "/reset"), (.GET, "/reset"):
            self.ledger.reset()
            self.feedback.reset()
            return (.ok, "{\"reset\":true}\n")
        case (.POST, "/outage"):
            let status = query.split(separator: "&").first { $0.hasPrefix("status=") }.flatMap { Int($0.dropFirst("status=".count)) }
            guard let status, self.outage.set(status) else {
                let error = JSONValue.object([("error", .string("POST /outage needs status=429, 500 or 503, got \"\(query)\""))])
                return (.badRequest, String(decoding: error.compactUTF8, as: UTF8.self) + "\n")
            }
            return (.ok, "{\"outage\":\(status)}\n")
        case (.DELETE, "/outage"):
            self.outage.set(nil)
            return (.ok, "{\"outage\":null}\n")
        case (.POST, "/stall"):
            self.stall.begin()
            return (.ok, "{\"stall\":true}\n")
        case (.DELETE, "/stall"):
            self.stall.end()
            return (.ok, "{\"stall\":false}\n")
        default:
            return (.notFound, "{\"error\":\"unknown path \(path); try GET /stats, POST /reset, POST /outage?status=503, DELETE /outage, POST /stall or DELETE /stall\"}\n")
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
