// libFuzzer target: the HTTP/2 client's answer decoding, HTTP2FrameParser and HPACKAnswerDecoder
// (with HPACKHeaderDecoder as a second opinion).
//
// The input is the bytes a server sends after its preface. Properties:
// 1. Nothing traps: every problem is a thrown HTTP2ConnectionError (typed throws), and HPACK
//    problems carry COMPRESSION_ERROR.
// 2. Frame parsing: nil consumes nothing; a frame consumes exactly 9 + its declared length; the
//    frames and the error are the same whether the bytes arrive at once or one at a time.
// 3. Each complete header block (HEADERS + CONTINUATIONs) goes to HPACKAnswerDecoder.status(of:)
//    and to HPACKHeaderDecoder.decode; both keep a dynamic table across blocks. They must agree
//    on success or failure, and on the `:status` (HPACKAnswerDecoder's documented contract: the
//    last `:status`, -1 when its value is not three digits, nil when the block has none).
//    Known difference, documented on HPACKAnswerDecoder.status(of:): it decodes a Huffman string
//    only when it needs it, so a badly padded or EOS-containing Huffman string it skips is not
//    refused (RFC 7541 §5.2 makes that a decoding error; nothing is read from it). When only HPACKHeaderDecoder refuses,
//    with a Huffman error, the block is not compared further and the connection is taken as ended.
import FuzzSupport
import APNSWire
import NIOCore


private func frames(_ bytes: [UInt8], chunkSize: Int) -> ([HTTP2InboundFrame], HTTP2ConnectionError?) {
    var parser = HTTP2FrameParser()
    var buffer = ByteBuffer()
    var out: [HTTP2InboundFrame] = []
    var offset = 0
    while offset < bytes.count {
        let end = min(bytes.count, offset + chunkSize)
        buffer.writeBytes(bytes[offset..<end])
        offset = end
        while true {
            let before = buffer.readerIndex
            let readable = buffer.readableBytes
            let declared = readable >= 3 ? Int(buffer.getInteger(at: before, as: UInt8.self)!) << 16 | Int(buffer.getInteger(at: before + 1, as: UInt16.self)!) : -1
            do {
                guard let frame = try parser.next(from: &buffer) else {
                    check(buffer.readerIndex == before, "nil after consuming \(buffer.readerIndex - before) bytes")
                    break
                }
                check(buffer.readerIndex - before == 9 + declared, "a frame declaring \(declared) bytes consumed \(buffer.readerIndex - before)")
                out.append(frame)
            } catch {
                return (out, error)
            }
        }
    }
    return (out, nil)
}

private func expectedStatus(_ fields: [HTTP2HeaderField]) -> Int? {
    guard let last = fields.last(where: { $0.name == ":status" }) else { return nil }
    let utf8 = Array(last.value.utf8)
    guard utf8.count == 3, utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else { return -1 }
    return Int(last.value)!
}

/// The entry point of SwiftPM's Linux debug builds (`--defsym main=FuzzHTTP2Answer_main`); release builds use
/// libFuzzer's own `main` and never call this.
@_cdecl("FuzzHTTP2Answer_main")
public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runFuzzDriver(argc, argv) { data, size in fuzzTestOneInput(UnsafeRawPointer(data), size) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    let (whole, wholeError) = frames(bytes, chunkSize: max(1, bytes.count))
    let (split, splitError) = frames(bytes, chunkSize: 1)
    check(whole == split, "one buffer gives \(whole.count) frames, byte-at-a-time \(split.count)")
    check(wholeError == splitError, "one buffer fails with \(String(describing: wholeError)), byte-at-a-time with \(String(describing: splitError))")

    var answers = HPACKAnswerDecoder()
    var headers = HPACKHeaderDecoder()
    var block: ByteBuffer? = nil
    for frame in whole {
        var complete: ByteBuffer? = nil
        switch frame {
        case .headers(_, let fragment, let endHeaders, _):
            if endHeaders { complete = fragment } else { block = ByteBuffer(buffer: fragment) }
        case .continuation(_, var fragment, let endHeaders):
            guard block != nil else { continue }
            block!.writeBuffer(&fragment)
            if endHeaders { complete = block; block = nil }
        default:
            continue
        }
        guard let headerBlock = complete else { continue }
        let status: Result<Int?, HTTP2ConnectionError>
        do { status = .success(try answers.status(of: headerBlock)) } catch { status = .failure(error) }
        var fields: [HTTP2HeaderField] = []
        let decoded: Result<Int, HTTP2ConnectionError>
        do { decoded = .success(try headers.decode(headerBlock, into: &fields)) } catch { decoded = .failure(error) }
        switch (status, decoded) {
        case (.success(let s), .success):
            check(s == expectedStatus(fields), "HPACKAnswerDecoder says :status \(String(describing: s)), HPACKHeaderDecoder's fields say \(String(describing: expectedStatus(fields))): \(fields)")
        case (.failure(let a), .failure(let b)):
            check(a.code == HTTP2Wire.ErrorCode.compressionError && b.code == HTTP2Wire.ErrorCode.compressionError, "HPACK errors without COMPRESSION_ERROR: \(a), \(b)")
            return 0  // the connection ends here
        case (.success, .failure(let e)) where e.reason.contains("Huffman"):
            return 0  // the known difference above
        case (.success(let s), .failure(let e)):
            fatalError("PROPERTY VIOLATED: HPACKAnswerDecoder accepts (status \(String(describing: s))), HPACKHeaderDecoder refuses: \(e)")
        case (.failure(let e), .success):
            fatalError("PROPERTY VIOLATED: HPACKAnswerDecoder refuses (\(e)), HPACKHeaderDecoder accepts: \(fields)")
        }
    }
    return 0
}
