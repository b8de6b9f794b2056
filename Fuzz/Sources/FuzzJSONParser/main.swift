// libFuzzer target: JSONParser.parse, differential against Foundation's JSONSerialization.
//
// Property: JSONParser accepts an input iff
// `JSONSerialization.jsonObject(with:options: [.fragmentsAllowed])` does, except where
// JSONParser's documented contract (JSONParser.swift: "a strict RFC 8259 parser: one value,
// optional surrounding white space, nothing else. Strings must be valid UTF-8"; maximumDepth 64
// "so that hostile input cannot exhaust the stack") differs on purpose. Those exceptions:
//   E1 depth: JSONParser rejects nesting deeper than JSONParser.maximumDepth (64); Foundation
//      allows deeper. Inputs nested deeper than 64 are not compared.
//   E2 encoding: JSONParser reads UTF-8 only; Foundation detects UTF-16/UTF-32 (by BOM or by
//      NUL bytes) and skips a UTF-8 BOM. Inputs starting with a BOM or containing a NUL byte
//      are not compared.
//   E3 numbers: JSONParser keeps numbers as text (JSONValue.number(String)) and so accepts any
//      RFC 8259 number; Foundation refuses numbers it cannot represent (e.g. 1e400). Inputs
//      JSONParser accepts and Foundation refuses while containing a number whose Double value is
//      not finite are not counted as a difference.
//   E4 trailing commas: Foundation on Linux (swift-foundation) accepts `[1,]` and `{"a":1,}`,
//      which RFC 8259 does not allow. When Foundation accepts and JSONParser refuses, the input
//      with such commas removed must parse with JSONParser (so only the commas differ).
// Also: the parser never traps, and an accepted value re-serialised with JSONValue's writer
// parses again to the same value.
import FuzzSupport
import Foundation
import PushFleetCore


/// The deepest `[`/`{` nesting outside strings, scanning bytes loosely.
private func nestingDepth(_ bytes: [UInt8]) -> Int {
    var depth = 0
    var deepest = 0
    var inString = false
    var escaped = false
    for b in bytes {
        if inString {
            if escaped { escaped = false } else if b == UInt8(ascii: "\\") { escaped = true } else if b == UInt8(ascii: "\"") { inString = false }
            continue
        }
        switch b {
        case UInt8(ascii: "\""): inString = true
        case UInt8(ascii: "["), UInt8(ascii: "{"): depth += 1; deepest = max(deepest, depth)
        case UInt8(ascii: "]"), UInt8(ascii: "}"): depth -= 1
        default: break
        }
    }
    return deepest
}

/// `bytes` without the commas that directly precede (white space aside) a `]` or `}`, outside strings.
private func withoutTrailingCommas(_ bytes: [UInt8]) -> [UInt8] {
    var out: [UInt8] = []
    var inString = false
    var escaped = false
    var pendingComma: Int? = nil  // index in `out` of a comma not yet followed by a value
    for b in bytes {
        if inString {
            if escaped { escaped = false } else if b == UInt8(ascii: "\\") { escaped = true } else if b == UInt8(ascii: "\"") { inString = false }
            out.append(b)
            continue
        }
        switch b {
        case 0x20, 0x0A, 0x0D, 0x09:
            out.append(b)
            continue
        case UInt8(ascii: "]"), UInt8(ascii: "}"):
            if let comma = pendingComma { out.remove(at: comma) }
        case UInt8(ascii: "\""):
            inString = true
        default:
            break
        }
        pendingComma = b == UInt8(ascii: ",") ? out.count : nil
        out.append(b)
    }
    return out
}

private func hasNonFiniteNumber(_ value: JSONValue) -> Bool {
    switch value {
    case .number(let text): return !(Double(text)?.isFinite ?? false)
    case .array(let elements): return elements.contains(where: hasNonFiniteNumber)
    case .object(let members): return members.contains { hasNonFiniteNumber($0.value) }
    default: return false
    }
}

private func describe(_ bytes: [UInt8]) -> String {
    "\(bytes.count) bytes \(String(decoding: bytes.prefix(200), as: UTF8.self).debugDescription) hex \(bytes.prefix(64).map { String(format: "%02x", $0) }.joined())"
}

/// The entry point of SwiftPM's Linux debug builds (`--defsym main=FuzzJSONParser_main`); release builds use
/// libFuzzer's own `main` and never call this.
@_cdecl("FuzzJSONParser_main")
public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runFuzzDriver(argc, argv) { data, size in fuzzTestOneInput(UnsafeRawPointer(data), size) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    let ours: Result<JSONValue, JSONParseError>
    do { ours = .success(try JSONParser.parse(bytes)) } catch { ours = .failure(error) }

    if case .success(let value) = ours {
        let written = value.compactUTF8
        let again = try? JSONParser.parse(written)
        check(again == value, "re-serialised value does not parse back the same: \(describe(bytes)) -> \(describe(written))")
    }

    // E2
    if bytes.contains(0) || bytes.starts(with: [0xEF, 0xBB, 0xBF]) || bytes.starts(with: [0xFE, 0xFF]) || bytes.starts(with: [0xFF, 0xFE]) {
        return 0
    }
    // E1
    if nestingDepth(bytes) > JSONParser.maximumDepth { return 0 }

    let foundation: Result<Any, any Error>
    do { foundation = .success(try JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])) } catch { foundation = .failure(error) }

    switch (ours, foundation) {
    case (.success, .success), (.failure, .failure):
        return 0
    case (.success(let value), .failure(let error)):
        if hasNonFiniteNumber(value) { return 0 }  // E3
        fatalError("PROPERTY VIOLATED: JSONParser accepts, Foundation refuses (\(error)): \(describe(bytes))")
    case (.failure(let error), .success):
        if (try? JSONParser.parse(withoutTrailingCommas(bytes))) != nil { return 0 }  // E4
        fatalError("PROPERTY VIOLATED: Foundation accepts, JSONParser refuses (\(error)): \(describe(bytes))")
    }
}
