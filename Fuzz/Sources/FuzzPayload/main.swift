// libFuzzer target: Payload(jsonText:format:), the check every operator's `--payload`, every API
// request's payload and every campaign's payload passes before anything is sent.
//
// Properties checked on arbitrary bytes, for each of the four formats (binary commands 0 and 1:
// 256 bytes; command 2: 2048; HTTP/2: 4096; HTTP/2 VoIP: 5120):
// 1. It never traps, and refuses with the right code: `invalidJSON` exactly when JSONParser
//    refuses the text, `notAnObject` when the value is not an object, `tooLarge` exactly when the
//    compact form is over the format's limit. So acceptance under a smaller limit implies
//    acceptance under every larger one.
// 2. What it accepts is compact JSON as documented: valid UTF-8; no white space outside strings;
//    no raw control byte inside strings; `\u` escapes only for control characters (non-ASCII text
//    written as itself, `/` not escaped); no more than the limit's bytes.
// 3. The bytes parse back to the same value, and checking them again gives the same bytes.
// 4. Foundation's JSONSerialization reads the bytes as a JSON object (unless a number is beyond
//    Double, which Foundation refuses and PushFleet keeps as written).
import Foundation
import FuzzSupport
import PushFleetCore

private let formats: [PayloadFormat] = [.binaryLegacy, .binaryFrame, .http2, .voip]

private func describe(_ bytes: [UInt8]) -> String {
    String(decoding: bytes.prefix(200), as: UTF8.self).debugDescription + (bytes.count > 200 ? "… (\(bytes.count) bytes)" : "")
}

private func isHex(_ b: UInt8) -> Bool {
    (0x30...0x39).contains(b) || (0x61...0x66).contains(b) || (0x41...0x46).contains(b)
}

private func hexValue(_ b: UInt8) -> Int { Int(b <= 0x39 ? b - 0x30 : (b | 0x20) - 0x61 + 10) }

/// Checks the compact form byte by byte: white space only inside strings, escapes only as
/// documented.
private func checkCompact(_ bytes: [UInt8]) {
    var inString = false
    var i = 0
    while i < bytes.count {
        let b = bytes[i]
        if !inString {
            check(![0x20, 0x09, 0x0A, 0x0D].contains(b), "white space outside a string at \(i): \(describe(bytes))")
            if b == UInt8(ascii: "\"") { inString = true }
            i += 1
            continue
        }
        check(b >= 0x20, "raw control byte \(b) in a string at \(i): \(describe(bytes))")
        if b == UInt8(ascii: "\"") {
            inString = false
        } else if b == UInt8(ascii: "\\") {
            check(i + 1 < bytes.count, "escape at the end: \(describe(bytes))")
            let e = bytes[i + 1]
            switch e {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                i += 1
            case UInt8(ascii: "u"):
                check(i + 5 < bytes.count && bytes[(i + 2)...(i + 5)].allSatisfy(isHex), "bad \\u escape at \(i): \(describe(bytes))")
                let value = bytes[(i + 2)...(i + 5)].reduce(0) { $0 << 4 | hexValue($1) }
                check(value < 0x20 && ![0x0A, 0x0D, 0x09].contains(value), "\\u escape of \(value) at \(i), which is written otherwise: \(describe(bytes))")
                i += 5
            default:
                check(false, "escape \\\(Character(Unicode.Scalar(e))) at \(i), which compact output never writes: \(describe(bytes))")
            }
        }
        i += 1
    }
    check(!inString, "unterminated string: \(describe(bytes))")
}

/// Whether `value` holds a number Foundation cannot represent as a Double.
private func hasHugeNumber(_ value: JSONValue) -> Bool {
    switch value {
    case .number(let text): return !(Double(text)?.isFinite ?? false)
    case .array(let elements): return elements.contains(where: hasHugeNumber)
    case .object(let members): return members.contains { hasHugeNumber($0.value) }
    default: return false
    }
}

/// The entry point of SwiftPM's Linux debug builds (`--defsym main=FuzzPayload_main`); release
/// builds use libFuzzer's own `main` and never call this.
@_cdecl("FuzzPayload_main")
public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runFuzzDriver(argc, argv) { data, size in fuzzTestOneInput(UnsafeRawPointer(data), size) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let input = Array(UnsafeRawBufferPointer(start: start, count: count))
    let parsed = try? JSONParser.parse(input)
    var acceptedBefore = false
    for format in formats {
        let payload: Payload
        do {
            payload = try Payload(jsonText: input, format: format)
        } catch {
            switch error.code {
            case .invalidJSON:
                check(parsed == nil, "invalidJSON for text JSONParser reads: \(describe(input))")
            case .notAnObject:
                guard let parsed else { check(false, "notAnObject for text JSONParser refuses: \(describe(input))"); return 0 }
                if case .object = parsed { check(false, "notAnObject for an object: \(describe(input))") }
            default:
                check(error.code == .tooLarge, "unknown code \(error.code)")
                guard let parsed else { check(false, "tooLarge for text JSONParser refuses: \(describe(input))"); return 0 }
                check(parsed.compactUTF8.count > format.maximumByteCount, "tooLarge (\(format)) for \(parsed.compactUTF8.count) bytes: \(describe(input))")
            }
            check(!acceptedBefore, "accepted under a smaller limit, refused under \(format): \(describe(input))")
            continue
        }
        acceptedBefore = true
        guard let parsed, case .object = parsed else { check(false, "accepted what is not a JSON object: \(describe(input))"); return 0 }
        let bytes = payload.bytes
        check(bytes == parsed.compactUTF8 && payload.byteCount == bytes.count, "bytes are not the value's compact form: \(describe(input))")
        check(bytes.count <= format.maximumByteCount, "\(bytes.count) bytes accepted for \(format)")
        check(String(validating: bytes, as: UTF8.self) != nil, "not valid UTF-8: \(describe(bytes))")
        checkCompact(bytes)
        let again = try? JSONParser.parse(bytes)
        check(again == parsed, "the compact form parses to another value: \(describe(input)) -> \(describe(bytes))")
        let checkedAgain = try? Payload(jsonText: bytes, format: format)
        check(checkedAgain?.bytes == bytes, "checking the compact form again changed it: \(describe(bytes))")
        if format == .binaryLegacy || (bytes.count > 256 && format == .binaryFrame) || (bytes.count > 2048 && format == .http2) {
            let object = try? JSONSerialization.jsonObject(with: Data(bytes))
            check(object is [String: Any] || hasHugeNumber(parsed), "Foundation does not read the compact form as an object: \(describe(bytes))")
        }
    }
    return 0
}
