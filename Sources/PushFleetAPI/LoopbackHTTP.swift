import Foundation
public import NIOCore
public import NIOPosix

/// One HTTP/1.1 request over plain TCP to a loopback server, read until the server closes
/// (`connection: close`): enough for `pushfleet demo --doorbell` and the tests to drive
/// `pushfleet api` without an HTTP client library. Chunked bodies are decoded.
public enum LoopbackHTTP {
    public struct Answer: Sendable {
        public var status: Int
        /// Header names in lowercase.
        public var headers: [String: String]
        public var body: String
    }

    public static func request(
        _ method: String, port: Int, path: String, bearer: String? = nil, body: String? = nil, host: String = "127.0.0.1",
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, timeout: TimeAmount = .seconds(30)
    ) async throws -> Answer {
        var head = "\(method) \(path) HTTP/1.1\r\nhost: \(host):\(port)\r\nconnection: close\r\n"
        if let bearer { head += "authorization: Bearer \(bearer)\r\n" }
        if let body { head += "content-type: application/json\r\ncontent-length: \(body.utf8.count)\r\n" }
        let bytes = Array((head + "\r\n" + (body ?? "")).utf8)
        let collector = Collector()
        let channel = try await ClientBootstrap(group: group)
            .channelInitializer { channel in channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(collector) } }
            .connect(host: host, port: port)
            .get()
        // An answer that never ends closes the connection, and the request fails, after `timeout`.
        let deadline = channel.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
        defer { deadline.cancel() }
        try await channel.writeAndFlush(ByteBuffer(bytes: bytes))
        try await channel.closeFuture.get()
        return try Self.parse(collector.received)
    }

    static func parse(_ raw: [UInt8]) throws -> Answer {
        let text = String(decoding: raw, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n") else { throw LoopbackHTTPError(message: "no complete answer: \(text.prefix(200))") }
        let lines = text[..<split.lowerBound].components(separatedBy: "\r\n")
        let statusParts = lines.first?.split(separator: " ") ?? []
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else { throw LoopbackHTTPError(message: "bad status line: \(lines.first ?? "")") }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        var body = String(text[split.upperBound...])
        if headers["transfer-encoding"]?.lowercased() == "chunked" {
            var decoded = ""
            var rest = Substring(body)
            while let lineEnd = rest.range(of: "\r\n"), let size = Int(rest[..<lineEnd.lowerBound], radix: 16), size > 0 {
                let start = lineEnd.upperBound
                let chunk = rest.utf8[start...].prefix(size)
                decoded += String(decoding: chunk, as: UTF8.self)
                rest = rest[rest.utf8.index(start, offsetBy: size)...].dropFirst(2)
            }
            body = decoded
        }
        return Answer(status: status, headers: headers, body: body)
    }

    private final class Collector: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        // Touched only on the channel's event loop, then read after the channel closed.
        var received: [UInt8] = []

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            self.received += Self.unwrapInboundIn(data).readableBytesView
        }
    }
}

public struct LoopbackHTTPError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { self.message }
}
