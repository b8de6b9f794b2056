#if canImport(Glibc)
import Glibc
#endif
import PushFleetCore

/// Reads a token file in batches without holding it in memory: one token per line in hex, spaces
/// inside a token allowed, blank lines and `#` comments skipped. `-` reads standard input.
final class TokenFileReader {
    let path: String
    private let file: UnsafeMutablePointer<FILE>
    private var line: UnsafeMutablePointer<CChar>? = nil
    private var capacity = 0
    /// The number of the last line read, from 1.
    private(set) var lineNumber = 0
    /// Bytes read so far, and the file's size (`nil` for standard input or a pipe).
    private(set) var bytesRead = 0
    let size: Int?

    /// - Throws: ``CLIError`` if the file cannot be opened.
    init(path: String) throws {
        self.path = path
        if path == "-" {
            guard let standardInput = fdopen(STDIN_FILENO, "r") else {
                throw CLIError("cannot read standard input: \(String(cString: strerror(errno)))")
            }
            self.file = standardInput
            self.size = nil
        } else {
            guard let opened = fopen(path, "r") else {
                throw CLIError("cannot open the token file \(path): \(String(cString: strerror(errno)))")
            }
            self.file = opened
            var status = stat()
            self.size = fstat(fileno(opened), &status) == 0 && (status.st_mode & S_IFMT) == S_IFREG ? Int(status.st_size) : nil
        }
    }

    deinit {
        free(self.line)
        if self.path != "-" { fclose(self.file) }
    }

    /// Line numbers of the tokens of the last batch, in order.
    private var batchLines: [Int] = []

    /// The line of token `index` of the last batch read.
    func lineOf(tokenAtBatchIndex index: Int) -> Int { self.batchLines[index] }

    /// The next tokens, at most `maximum`; empty at the end of the file.
    /// - Throws: ``CLIError`` naming the file and line of a bad token, or a read error.
    func read(upTo maximum: Int) throws -> [DeviceToken] {
        var tokens: [DeviceToken] = []
        tokens.reserveCapacity(min(maximum, 4096))
        self.batchLines.removeAll(keepingCapacity: true)
        while tokens.count < maximum {
            let length = getline(&self.line, &self.capacity, self.file)
            if length < 0 {
                if ferror(self.file) != 0 { throw CLIError("cannot read the token file \(self.path): \(String(cString: strerror(errno)))") }
                break
            }
            self.lineNumber += 1
            self.bytesRead += length
            let bytes = UnsafeRawBufferPointer(start: self.line, count: length)
            var end = bytes.endIndex
            while end > bytes.startIndex, Self.isSpace(bytes[end - 1]) { end -= 1 }
            var start = bytes.startIndex
            while start < end, Self.isSpace(bytes[start]) { start += 1 }
            if start == end || bytes[start] == UInt8(ascii: "#") { continue }
            do {
                tokens.append(try DeviceToken(hexUTF8: UnsafeRawBufferPointer(rebasing: bytes[start..<end])))
                self.batchLines.append(self.lineNumber)
            } catch {
                throw CLIError("\(self.path):\(self.lineNumber): \(error)")
            }
        }
        return tokens
    }

    /// Every remaining token, in order.
    func readAll() throws -> [DeviceToken] {
        var all: [DeviceToken] = []
        while true {
            let batch = try self.read(upTo: 65_536)
            if batch.isEmpty { return all }
            all += batch
        }
    }

    private static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }
}
