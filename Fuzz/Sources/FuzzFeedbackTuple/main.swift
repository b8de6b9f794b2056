// libFuzzer target: FeedbackTupleDecoder (feedback service records).
//
// Properties checked on arbitrary bytes:
// 1. Decoding never traps; a failure is a thrown error, and nil means "need more bytes" with
//    nothing consumed.
// 2. Every decoded tuple, re-encoded from the documented layout
//    `| timestamp (4, BE) | token length (2, BE) | token |` (38 bytes for today's 32-byte tokens)
//    by the independent encoder below, equals exactly the bytes the decoder consumed; the
//    module's `write(into:)` agrees.
// 3. Byte-at-a-time feeding through NIOSingleStepByteToMessageProcessor gives the same tuples and
//    the same failure as one buffer.
import FuzzSupport
import APNSWire
import NIOCore
import PushFleetCore

private func encodeTuple(timestamp: UInt32, token: [UInt8]) -> [UInt8] {
    var out: [UInt8] = []
    for shift in stride(from: 24, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: timestamp >> UInt32(shift))) }
    out.append(UInt8(truncatingIfNeeded: token.count >> 8))
    out.append(UInt8(truncatingIfNeeded: token.count))
    out += token
    return out
}



/// The entry point of SwiftPM's Linux debug builds (`--defsym main=FuzzFeedbackTuple_main`); release builds use
/// libFuzzer's own `main` and never call this.
@_cdecl("FuzzFeedbackTuple_main")
public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runFuzzDriver(argc, argv) { data, size in fuzzTestOneInput(UnsafeRawPointer(data), size) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    var buffer = ByteBuffer(bytes: bytes)
    var decoder = FeedbackTupleDecoder()
    var decoded: [FeedbackTuple] = []
    var failed = false
    while true {
        let before = buffer.readerIndex
        do {
            guard let tuple = try decoder.decode(buffer: &buffer) else {
                check(buffer.readerIndex == before, "nil returned but \(buffer.readerIndex - before) bytes consumed")
                break
            }
            let consumed = Array(bytes[before..<buffer.readerIndex])
            let expected = encodeTuple(timestamp: tuple.timestamp, token: tuple.token.bytes)
            check(consumed == expected, "re-encoded \(expected) != consumed \(consumed)")
            var written = ByteBuffer()
            tuple.write(into: &written)
            check(Array(written.readableBytesView) == expected, "write(into:) disagrees with the documented layout")
            check((1...DeviceToken.maximumByteCount).contains(tuple.token.count), "token of \(tuple.token.count) bytes accepted")
            decoded.append(tuple)
        } catch {
            // Only a declared token length of 0 or above the maximum may be refused.
            check(bytes.count - before >= 6, "threw \(error) with a header cut off")
            let declared = Int(bytes[before + 4]) << 8 | Int(bytes[before + 5])
            check(declared == 0 || declared > DeviceToken.maximumByteCount, "threw \(error) for a token of \(declared) bytes")
            failed = true
            break
        }
    }
    if !failed {
        do {
            let last = try decoder.decodeLast(buffer: &buffer, seenEOF: true)
            check(last == nil, "decodeLast produced a tuple the loop did not")
            check(buffer.readableBytes == 0, "decodeLast at EOF accepted a \(buffer.readableBytes)-byte tail silently")
        } catch {
            check(buffer.readableBytes > 0, "decodeLast threw \(error) on an empty tail")
        }
    }
    for chunk in [1, 6, 37] {
        let (viaChunks, chunkFailed) = decodeInChunks(bytes, chunkSize: chunk, with: FeedbackTupleDecoder())
        check(viaChunks == decoded, "chunks of \(chunk) decoded \(viaChunks.count) tuples, whole buffer \(decoded.count)")
        // The whole-buffer run above did not call decodeLast after a failure; a trailing partial
        // tuple makes finishProcessing fail, so the processor may fail where the loop stopped clean.
        check(chunkFailed == failed || (!failed && chunkFailed), "chunks of \(chunk) failed=\(chunkFailed), whole failed=\(failed)")
    }
    return 0
}
