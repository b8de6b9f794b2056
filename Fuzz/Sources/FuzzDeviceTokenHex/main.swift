// libFuzzer target: DeviceToken(hexUTF8:), the parser of one line of a token file.
//
// The rules, from DeviceToken.swift's doc comments and code: hexadecimal digits, upper or lower
// case, with optional spaces (and tabs) between them and optional surrounding `<` `>`; a token is
// whole bytes (an even digit count), 1 to DeviceToken.maximumByteCount (255) bytes. In the code
// `<` is accepted anywhere before the first digit and `>` only as the very last byte.
// TokenFileReader (in the pushfleet executable, not reachable from here; its trimming is repeated
// below) first strips spaces, tabs, CR and LF at both ends and skips empty and `#` lines.
//
// Properties checked on arbitrary bytes, both as given and as TokenFileReader trims them:
// 1. The parser never traps.
// 2. It accepts iff the reference grammar below does (the fast path for plain 2..64-digit tokens
//    and the slow path must agree with it).
// 3. An accepted token's lowercase hex (`hexString`) equals the input's digits lowercased, its
//    `count` is half the digit count, and DeviceToken(bytes:) of its bytes is the same token.
// 4. DeviceToken(hexDigitsUTF8:) (digits only, as an HTTP/2 path carries a token) accepts iff every
//    byte is a hex digit and the general parser accepts, and gives the same token.
import FuzzSupport
import PushFleetCore


private func isHexDigit(_ b: UInt8) -> Bool {
    (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(b)
        || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(b)
}

/// The reference grammar: the lowercased digits if `line` is a token, else nil.
private func referenceDigits(_ line: [UInt8]) -> [UInt8]? {
    var digits: [UInt8] = []
    for (offset, b) in line.enumerated() {
        if isHexDigit(b) {
            digits.append(b | (b >= UInt8(ascii: "A") ? 0x20 : 0))
        } else if b == UInt8(ascii: " ") || b == UInt8(ascii: "\t") {
            continue
        } else if b == UInt8(ascii: "<") && digits.isEmpty {
            continue
        } else if b == UInt8(ascii: ">") && offset == line.count - 1 {
            continue
        } else {
            return nil
        }
    }
    guard !digits.isEmpty, digits.count % 2 == 0, digits.count / 2 <= DeviceToken.maximumByteCount else { return nil }
    return digits
}

private func trimmedLikeTokenFileReader(_ line: [UInt8]) -> [UInt8]? {
    func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D }
    var start = 0
    var end = line.count
    while end > start, isSpace(line[end - 1]) { end -= 1 }
    while start < end, isSpace(line[start]) { start += 1 }
    if start == end || line[start] == UInt8(ascii: "#") { return nil }  // skipped, not parsed
    return Array(line[start..<end])
}

private func checkLine(_ line: [UInt8]) {
    let expected = referenceDigits(line)
    let parsed: DeviceToken?
    let failure: DeviceTokenError?
    do {
        parsed = try DeviceToken(hexUTF8: line)
        failure = nil
    } catch {
        parsed = nil
        failure = error
    }
    let digitsOnly = line.withUnsafeBytes { DeviceToken(hexDigitsUTF8: $0) }
    check(digitsOnly == (line.allSatisfy(isHexDigit) ? parsed : nil), "digits only: \(String(describing: digitsOnly)) for \(line)")
    // Also through the contiguous-storage-less generic path.
    let viaSequence = try? DeviceToken(hexUTF8: line.lazy.map { $0 })
    check(viaSequence == parsed, "the generic path disagrees with the array path on \(line)")
    switch (expected, parsed) {
    case (nil, nil):
        break
    case (let digits?, let token?):
        check(Array(token.hexString.utf8) == digits, "hexString \(token.hexString) != input digits \(String(decoding: digits, as: UTF8.self))")
        check(token.count * 2 == digits.count, "count \(token.count) for \(digits.count) digits")
        check((try? DeviceToken(bytes: token.bytes)) == token, "DeviceToken(bytes:) of the bytes differs")
    case (nil, let token?):
        fatalError("PROPERTY VIOLATED: accepted \(line) (\(String(decoding: line, as: UTF8.self).debugDescription)) as \(token.hexString), the grammar rejects it")
    case (_?, nil):
        fatalError("PROPERTY VIOLATED: rejected \(line) (\(String(decoding: line, as: UTF8.self).debugDescription)): \(failure!), the grammar accepts it")
    }
}

/// The entry point of SwiftPM's Linux debug builds (`--defsym main=FuzzDeviceTokenHex_main`); release builds use
/// libFuzzer's own `main` and never call this.
@_cdecl("FuzzDeviceTokenHex_main")
public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runFuzzDriver(argc, argv) { data, size in fuzzTestOneInput(UnsafeRawPointer(data), size) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    checkLine(bytes)
    if let line = trimmedLikeTokenFileReader(bytes), line != bytes { checkLine(line) }
    return 0
}
