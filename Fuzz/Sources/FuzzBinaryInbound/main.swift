// libFuzzer target: BinaryNotificationDecoder, the simulator's reader of binary-protocol
// notifications (commands 0, 1 and 2) as a gateway receives them from any client.
//
// Properties checked on arbitrary bytes:
// 1. Decoding never traps; nil means "need more bytes" with nothing consumed.
// 2. It agrees, message for message, with the independent reference decoder below, written from
//    the documented layouts over a plain byte array: the same notifications (command, identifier,
//    token and payload bytes, expiration, priority), the same unparseable frames (with the
//    identifier read before the fault), and the same bytes consumed by each.
// 3. Fed through NIO's processor in chunks of 1, 3 or 7 bytes it yields the same messages up to
//    and including the first unparseable one (after which the gateway closes the connection and
//    the stream cannot be resynchronised).
import FuzzSupport
import APNSWire
import NIOCore

/// A decoded message in plain values, to compare the decoder with the reference.
private enum Message: Equatable {
    case notification(command: UInt8, identifier: UInt32, token: [UInt8]?, payload: [UInt8]?, expiration: UInt32?, priority: UInt8?)
    case unparseable(identifier: UInt32)

    init(_ message: BinaryInboundMessage) {
        switch message {
        case .notification(let n):
            self = .notification(
                command: n.command, identifier: n.identifier, token: n.token.map { Array($0.readableBytesView) },
                payload: n.payload.map { Array($0.readableBytesView) }, expiration: n.expiration, priority: n.priority
            )
        case .unparseable(let identifier, _):
            self = .unparseable(identifier: identifier)
        }
    }

    var isUnparseable: Bool { if case .unparseable = self { true } else { false } }
}

private func be16(_ b: ArraySlice<UInt8>, _ at: Int) -> Int? {
    at + 2 <= b.endIndex ? Int(b[at]) << 8 | Int(b[at + 1]) : nil
}

private func be32(_ b: ArraySlice<UInt8>, _ at: Int) -> UInt32? {
    at + 4 <= b.endIndex ? UInt32(b[at]) << 24 | UInt32(b[at + 1]) << 16 | UInt32(b[at + 2]) << 8 | UInt32(b[at + 3]) : nil
}

/// One message from the front of `b` and the bytes it takes, or nil if `b` holds no whole one.
///
/// Command 0: `| 0 | token length (2) | token | payload length (2) | payload |`.
/// Command 1: `| 1 | identifier (4) | expiry (4) | token length (2) | token | payload length (2) | payload |`.
/// Command 2: `| 2 | frame length (4) | items |`, items `| id (1) | length (2) | data |`, ids 1 to 5
/// (token, payload, identifier of 4 bytes, expiration of 4, priority of 1), each at most once; a
/// frame longer than five items of 65,535 bytes is refused before it is read. Any other first byte
/// is refused, taking everything that is there.
private func referenceDecode(_ b: ArraySlice<UInt8>) -> (Message, Int)? {
    let s = b.startIndex
    guard let command = b.first else { return nil }
    switch command {
    case 0:
        guard let tokenLength = be16(b, s + 1), let payloadLength = be16(b, s + 3 + tokenLength),
            b.count >= 5 + tokenLength + payloadLength
        else { return nil }
        let token = Array(b[(s + 3)..<(s + 3 + tokenLength)])
        let payload = Array(b[(s + 5 + tokenLength)..<(s + 5 + tokenLength + payloadLength)])
        return (.notification(command: 0, identifier: 0, token: token, payload: payload, expiration: nil, priority: nil), 5 + tokenLength + payloadLength)
    case 1:
        guard let identifier = be32(b, s + 1), let expiry = be32(b, s + 5), let tokenLength = be16(b, s + 9),
            let payloadLength = be16(b, s + 11 + tokenLength), b.count >= 13 + tokenLength + payloadLength
        else { return nil }
        let token = Array(b[(s + 11)..<(s + 11 + tokenLength)])
        let payload = Array(b[(s + 13 + tokenLength)..<(s + 13 + tokenLength + payloadLength)])
        return (.notification(command: 1, identifier: identifier, token: token, payload: payload, expiration: expiry, priority: nil), 13 + tokenLength + payloadLength)
    case 2:
        guard let frameLength = be32(b, s + 1) else { return nil }
        guard frameLength <= 5 * 65_538 else { return (.unparseable(identifier: 0), b.count) }
        guard b.count >= 5 + Int(frameLength) else { return nil }
        let frame = b[(s + 5)..<(s + 5 + Int(frameLength))]
        var token: [UInt8]? = nil, payload: [UInt8]? = nil
        var identifier: UInt32 = 0, expiration: UInt32? = nil, priority: UInt8? = nil
        var seen = Set<UInt8>()
        var at = frame.startIndex
        while at < frame.endIndex {
            guard at + 3 <= frame.endIndex, let length = be16(frame, at + 1), at + 3 + length <= frame.endIndex,
                (1...5).contains(frame[at]), seen.insert(frame[at]).inserted
            else { return (.unparseable(identifier: identifier), 5 + Int(frameLength)) }
            let data = frame[(at + 3)..<(at + 3 + length)]
            switch frame[at] {
            case 1: token = Array(data)
            case 2: payload = Array(data)
            case 3:
                guard length == 4 else { return (.unparseable(identifier: identifier), 5 + Int(frameLength)) }
                identifier = be32(data, data.startIndex)!
            case 4:
                guard length == 4 else { return (.unparseable(identifier: identifier), 5 + Int(frameLength)) }
                expiration = be32(data, data.startIndex)!
            default:
                guard length == 1 else { return (.unparseable(identifier: identifier), 5 + Int(frameLength)) }
                priority = data.first!
            }
            at += 3 + length
        }
        return (.notification(command: 2, identifier: identifier, token: token, payload: payload, expiration: expiration, priority: priority), 5 + Int(frameLength))
    default:
        return (.unparseable(identifier: 0), b.count)
    }
}

/// The entry point of SwiftPM's Linux debug builds (`--defsym main=FuzzBinaryInbound_main`);
/// release builds use libFuzzer's own `main` and never call this.
@_cdecl("FuzzBinaryInbound_main")
public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runFuzzDriver(argc, argv) { data, size in fuzzTestOneInput(UnsafeRawPointer(data), size) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    var buffer = ByteBuffer(bytes: bytes)
    var decoder = BinaryNotificationDecoder()
    var decoded: [Message] = []
    var offset = 0
    while true {
        let before = buffer.readerIndex
        let message: BinaryInboundMessage?
        do {
            message = try decoder.decode(buffer: &buffer)
        } catch {
            check(false, "decode threw \(error); it reports bad bytes as .unparseable")
            return 0
        }
        let expected = referenceDecode(bytes[offset...])
        guard let message else {
            check(buffer.readerIndex == before, "nil returned but \(buffer.readerIndex - before) bytes consumed")
            check(expected == nil, "decoder wants more bytes at offset \(offset); the reference reads \(String(describing: expected))")
            break
        }
        let consumed = buffer.readerIndex - before
        check(consumed > 0, "a message from no bytes at offset \(offset)")
        guard let (reference, length) = expected else {
            check(false, "decoder read \(Message(message)) at offset \(offset); the reference wants more bytes")
            return 0
        }
        check(Message(message) == reference, "at offset \(offset): decoder \(Message(message)), reference \(reference)")
        check(consumed == length, "at offset \(offset): decoder took \(consumed) bytes, reference \(length)")
        decoded.append(reference)
        offset += consumed
    }

    let prefix = decoded.prefix { !$0.isUnparseable } + decoded.drop { !$0.isUnparseable }.prefix(1)
    for chunk in [1, 3, 7] {
        let (viaChunks, failed) = decodeInChunks(bytes, chunkSize: chunk, with: BinaryNotificationDecoder())
        check(!failed, "chunks of \(chunk): the processor failed")
        let chunked = viaChunks.map(Message.init)
        let chunkedPrefix = chunked.prefix { !$0.isUnparseable } + chunked.drop { !$0.isUnparseable }.prefix(1)
        check(Array(chunkedPrefix) == Array(prefix), "chunks of \(chunk): \(chunkedPrefix.count) messages to the first unparseable, whole buffer \(prefix.count)")
    }
    return 0
}
