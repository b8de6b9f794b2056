// libFuzzer target: BinaryErrorResponseDecoder (binary provider protocol error-response packet).
//
// Properties checked on arbitrary bytes:
// 1. Decoding never traps; a failure is a thrown error, and nil means "need more bytes" with
//    nothing consumed.
// 2. Every decoded value, re-encoded from the documented layout `| 8 | status | identifier (4, BE) |`
//    by the independent encoder below, equals exactly the bytes the decoder consumed (and the
//    module's own `write(into:)` agrees with that encoder).
// 3. Feeding the same bytes one at a time through NIOSingleStepByteToMessageProcessor yields the
//    same messages, and the same failure, as feeding them all at once.
import FuzzSupport
import APNSWire
import NIOCore

/// The documented six-byte layout, written without the module's help.
private func encodeErrorResponse(status: UInt8, identifier: UInt32) -> [UInt8] {
    [8, status, UInt8(truncatingIfNeeded: identifier >> 24), UInt8(truncatingIfNeeded: identifier >> 16),
     UInt8(truncatingIfNeeded: identifier >> 8), UInt8(truncatingIfNeeded: identifier)]
}



/// The entry point of SwiftPM's Linux debug builds (`--defsym main=FuzzBinaryErrorResponse_main`); release builds use
/// libFuzzer's own `main` and never call this.
@_cdecl("FuzzBinaryErrorResponse_main")
public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runFuzzDriver(argc, argv) { data, size in fuzzTestOneInput(UnsafeRawPointer(data), size) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    var buffer = ByteBuffer(bytes: bytes)
    var decoder = BinaryErrorResponseDecoder()
    var decoded: [BinaryErrorResponse] = []
    var failed = false
    while true {
        let before = buffer.readerIndex
        do {
            guard let response = try decoder.decode(buffer: &buffer) else {
                check(buffer.readerIndex == before, "nil returned but \(buffer.readerIndex - before) bytes consumed")
                check(buffer.readableBytes < BinaryErrorResponse.byteCount, "nil returned with \(buffer.readableBytes) bytes readable")
                break
            }
            let consumed = bytes[before..<buffer.readerIndex]
            let expected = encodeErrorResponse(status: response.status.rawValue, identifier: response.identifier)
            check(Array(consumed) == expected, "re-encoded \(expected) != consumed \(Array(consumed))")
            var written = ByteBuffer()
            response.write(into: &written)
            check(Array(written.readableBytesView) == expected, "write(into:) \(Array(written.readableBytesView)) != \(expected)")
            decoded.append(response)
        } catch {
            check(bytes[before] != BinaryErrorResponse.command, "threw \(error) on a packet starting with the command byte")
            failed = true
            break
        }
    }
    if !failed {
        // decodeLast at EOF must not invent a value from a short tail.
        do {
            let last = try decoder.decodeLast(buffer: &buffer, seenEOF: true)
            check(last == nil, "decodeLast produced \(String(describing: last)) from \(buffer.readableBytes) bytes")
        } catch {
            // A wrong command byte in the tail is allowed to throw.
        }
    }
    for chunk in [1, 5, 7] {
        let (viaChunks, chunkFailed) = decodeInChunks(bytes, chunkSize: chunk, with: BinaryErrorResponseDecoder())
        check(viaChunks == decoded, "chunks of \(chunk) decoded \(viaChunks.count) values, whole buffer \(decoded.count)")
        check(chunkFailed == failed || (!failed && chunkFailed),
              "chunks of \(chunk) failed=\(chunkFailed), whole buffer failed=\(failed)")
    }
    return 0
}
