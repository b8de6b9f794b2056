public import CFuzzDriver
public import NIOCore

/// Runs libFuzzer with `test` as the target: what each target's `<Target>_main` (the entry point
/// of SwiftPM's Linux debug builds) does.
public func runFuzzDriver(
    _ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ test: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt {
    var argc = argc
    var argv = argv
    return LLVMFuzzerRunDriver(&argc, &argv, test)
}

/// Decodes `bytes` through NIO's processor, fed `chunkSize` bytes at a time; returns the messages
/// and whether decoding failed.
public func decodeInChunks<Decoder: NIOSingleStepByteToMessageDecoder>(
    _ bytes: [UInt8], chunkSize: Int, with decoder: Decoder
) -> ([Decoder.InboundOut], Bool) {
    let processor = NIOSingleStepByteToMessageProcessor(decoder)
    var out: [Decoder.InboundOut] = []
    var start = 0
    do {
        while start < bytes.count {
            let end = min(bytes.count, start + chunkSize)
            try processor.process(buffer: ByteBuffer(bytes: bytes[start..<end])) { out.append($0) }
            start = end
        }
        try processor.finishProcessing(seenEOF: true) { out.append($0) }
        return (out, false)
    } catch {
        return (out, true)
    }
}
