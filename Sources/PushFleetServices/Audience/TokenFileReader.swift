#if canImport(Glibc)
import Glibc
#endif
public import PushFleetCore

/// Reads a token file in batches without holding it in memory: one token per line in hex, spaces
/// inside a token allowed, blank lines and `#` comments skipped. `-` reads standard input.
///
/// An audience with fields per recipient is read too, told apart by its first line: CSV whose first
/// line is a header naming the columns (one of them `token`), or JSON lines (each an object with a
/// `"token"` member; see ``AudienceLine``). ``fields`` names the fields wanted; their values for each
/// token of the last batch are read with ``value(_:ofTokenAt:)`` or, as bytes, ``withBatchValues(_:)``
/// (none where a recipient has none or an empty one, and always for a plain token file).
public final class TokenFileReader {
    public let path: String
    /// The fields whose values the reader keeps for each token of a batch, in this order.
    public let fields: [String]
    /// What the file turned out to be, from its first line that is not blank or a comment.
    private enum Layout {
        case undecided
        case tokens
        /// The column of the token, and of each of ``fields`` (nil: the file has no such column).
        case csv(token: Int, fields: [Int?])
        case jsonLines
    }
    private var layout = Layout.undecided
    /// The lines and the values of ``fields`` of the tokens of the last batch.
    private var batch: Batch
    private let file: UnsafeMutablePointer<FILE>
    private var line: UnsafeMutablePointer<CChar>? = nil
    private var capacity = 0
    /// The number of the last line read, from 1.
    public private(set) var lineNumber = 0
    /// Bytes read so far, and the file's size (`nil` for standard input or a pipe).
    public private(set) var bytesRead = 0
    public let size: Int?

    /// - Throws: ``AudienceFileError`` if the file cannot be opened.
    /// Fields a CSV header must name (a JSON line may lack any).
    public let required: Set<String>

    public init(path: String, fields: [String] = [], required: Set<String> = []) throws {
        self.path = path
        self.fields = fields
        self.required = required
        self.batch = Batch(fieldCount: fields.count)
        if path == "-" {
            guard let standardInput = fdopen(STDIN_FILENO, "r") else {
                throw AudienceFileError("cannot read standard input: \(String(cString: strerror(errno)))")
            }
            self.file = standardInput
            self.size = nil
        } else {
            guard let opened = fopen(path, "r") else {
                throw AudienceFileError("cannot open the token file \(path): \(String(cString: strerror(errno)))")
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

    /// Whether the audience carries fields (CSV with a header, or JSON lines); false for a plain
    /// token file, and until its first line is read.
    public var hasFields: Bool {
        switch self.layout {
        case .csv, .jsonLines: true
        case .undecided, .tokens: false
        }
    }

    /// The line of token `index` of the last batch read.
    public func lineOf(tokenAtBatchIndex index: Int) -> Int { self.batch.lines[index] }

    /// The next tokens, at most `maximum`; empty at the end of the file.
    /// - Throws: ``AudienceFileError`` naming the file and line of a bad token, or a read error.
    public func read(upTo maximum: Int) throws -> [DeviceToken] {
        var tokens: [DeviceToken] = []
        tokens.reserveCapacity(min(maximum, 4096))
        // The batch, the line buffer and the counts are worked on as locals rather than through
        // `self` (a class: each access to a property is checked for exclusivity at run time), and
        // put back however the read ends. `self.layout` is still read once or twice a line.
        var batch = Batch(fieldCount: self.fields.count)
        swap(&batch, &self.batch)
        var (line, capacity, lineNumber, bytesRead) = (self.line, self.capacity, self.lineNumber, self.bytesRead)
        defer {
            swap(&batch, &self.batch)
            (self.line, self.capacity, self.lineNumber, self.bytesRead) = (line, capacity, lineNumber, bytesRead)
        }
        batch.removeAll()
        var fieldsOfColumn = self.fieldsOfColumn
        while tokens.count < maximum {
            let length = getline(&line, &capacity, self.file)
            if length < 0 {
                if ferror(self.file) != 0 { throw AudienceFileError("cannot read the token file \(self.path): \(String(cString: strerror(errno)))") }
                break
            }
            lineNumber += 1
            bytesRead += length
            let bytes = UnsafeRawBufferPointer(start: line, count: length)
            var end = bytes.endIndex
            while end > bytes.startIndex, Self.isSpace(bytes[end - 1]) { end -= 1 }
            var start = bytes.startIndex
            // A byte-order mark (spreadsheets write one) before the first line.
            if lineNumber == 1, end - start >= 3, bytes[start] == 0xEF, bytes[start + 1] == 0xBB, bytes[start + 2] == 0xBF { start += 3 }
            while start < end, Self.isSpace(bytes[start]) { start += 1 }
            if start == end || bytes[start] == UInt8(ascii: "#") { continue }
            let text = UnsafeRawBufferPointer(rebasing: bytes[start..<end])
            do {
                if case .undecided = self.layout, try self.decideLayout(text) {
                    fieldsOfColumn = self.fieldsOfColumn
                    continue
                }
                switch self.layout {
                case .undecided, .tokens:
                    tokens.append(try DeviceToken(hexUTF8: text))
                    batch.appendNone()
                case .csv(let tokenColumn, _) where memchr(text.baseAddress!, Int32(UInt8(ascii: "\"")), text.count) == nil:
                    // No quote: split in place, the wanted fields kept as bytes.
                    tokens.append(try Self.readUnquoted(text, tokenColumn: tokenColumn, fieldsOfColumn: fieldsOfColumn, into: &batch))
                case .csv(let tokenColumn, let fieldColumns):
                    let values = try AudienceLine.csvFields(text)
                    guard tokenColumn < values.count else {
                        throw AudienceLineError("\(values.count) fields, and no token (column \(tokenColumn + 1) of the header)")
                    }
                    tokens.append(try DeviceToken(hex: values[tokenColumn]))
                    for column in fieldColumns { batch.append(column.flatMap { $0 < values.count ? values[$0] : nil }) }
                case .jsonLines:
                    let (token, values) = try AudienceLine.jsonFields(text, names: self.fields)
                    tokens.append(try DeviceToken(hex: token))
                    for value in values { batch.append(value) }
                }
                batch.lines.append(lineNumber)
            } catch {
                throw AudienceFileError("\(self.path):\(lineNumber): \(error)")
            }
        }
        return tokens
    }

    /// Every remaining token, in order.
    public func readAll() throws -> [DeviceToken] {
        var all: [DeviceToken] = []
        while true {
            let batch = try self.read(upTo: 65_536)
            if batch.isEmpty { return all }
            all += batch
        }
    }

    /// For each column of a CSV header, the indices in ``fields`` of the fields it holds.
    private var fieldsOfColumn: [[Int]] = []

    /// The token of a CSV line without quotes, and its values of ``fields`` kept: as
    /// ``AudienceLine/csvFields(_:)`` reads such a line, without a string for any column.
    private static func readUnquoted(
        _ line: UnsafeRawBufferPointer, tokenColumn: Int, fieldsOfColumn: [[Int]], into batch: inout Batch
    ) throws -> DeviceToken {
        var token: DeviceToken? = nil
        let first = batch.appendNone()
        var column = 0
        var index = 0
        while true {
            var start = index
            // The next comma, found by memchr (a token's column alone is 64 bytes to pass).
            if let comma = memchr(line.baseAddress! + index, Int32(UInt8(ascii: ",")), line.count - index) {
                index = line.baseAddress!.distance(to: UnsafeRawPointer(comma))
            } else {
                index = line.count
            }
            var end = index
            while start < end, line[start] == UInt8(ascii: " ") || line[start] == UInt8(ascii: "\t") { start += 1 }
            while end > start, line[end - 1] == UInt8(ascii: " ") || line[end - 1] == UInt8(ascii: "\t") { end -= 1 }
            let field = UnsafeRawBufferPointer(rebasing: line[start..<end])
            if column == tokenColumn { token = try DeviceToken(hexUTF8: field) }
            // The token's column may be a wanted field too (`{{token}}`), as in a quoted line.
            if column < fieldsOfColumn.count, !fieldsOfColumn[column].isEmpty, !field.isEmpty {
                let value = batch.keep(field)
                for wanted in fieldsOfColumn[column] { batch.ranges[first + wanted] = value }
            }
            column += 1
            if index == line.count { break }
            index += 1  // the comma
        }
        guard let token else { throw AudienceLineError("\(column) fields, and no token (column \(tokenColumn + 1) of the header)") }
        return token
    }

    // MARK: - The values of the last batch

    /// The value of field `field` (an index in ``fields``) of token `index` of the last batch; nil
    /// for none.
    public func value(_ field: Int, ofTokenAt index: Int) -> String? {
        precondition(field < self.fields.count, "field \(field) of \(self.fields.count)")
        let range = self.batch.ranges[index * self.fields.count + field]
        return range.isEmpty ? nil : String(decoding: self.batch.bytes[range], as: UTF8.self)
    }

    /// The values of the last batch's tokens as UTF-8, readable while `body` runs.
    public func withBatchValues<Result>(_ body: (BatchValues) throws -> Result) rethrows -> Result {
        try self.batch.bytes.withUnsafeBufferPointer { bytes in
            try self.batch.ranges.withUnsafeBufferPointer { ranges in
                try body(BatchValues(bytes: bytes, ranges: ranges, fieldCount: self.fields.count))
            }
        }
    }

    /// The values of a batch's tokens, valid only inside ``withBatchValues(_:)``.
    public struct BatchValues {
        fileprivate let bytes: UnsafeBufferPointer<UInt8>
        fileprivate let ranges: UnsafeBufferPointer<Range<Int>>
        fileprivate let fieldCount: Int

        /// The UTF-8 of field `field` of token `index`; nil for none.
        public subscript(token index: Int, field field: Int) -> UnsafeBufferPointer<UInt8>? {
            precondition(field < self.fieldCount && (index + 1) * self.fieldCount <= self.ranges.count, "token \(index), field \(field)")
            let range = self.ranges[index * self.fieldCount + field]
            return range.isEmpty ? nil : UnsafeBufferPointer(rebasing: self.bytes[range])
        }
    }

    /// A batch's tokens' lines, and their values of ``fields``: for each token, for each field,
    /// where its value lies in one buffer of UTF-8 (empty for none; invalid UTF-8 repaired as
    /// `String(decoding:as:)` repairs it). No string, no array per recipient.
    private struct Batch {
        let fieldCount: Int
        var lines: [Int] = []
        var bytes: [UInt8] = []
        var ranges: [Range<Int>] = []

        init(fieldCount: Int) { self.fieldCount = fieldCount }

        mutating func removeAll() {
            self.lines.removeAll(keepingCapacity: true)
            self.bytes.removeAll(keepingCapacity: true)
            self.ranges.removeAll(keepingCapacity: true)
        }

        /// A token without values; returns where its fields' ranges start.
        @discardableResult
        mutating func appendNone() -> Int {
            let first = self.ranges.count
            for _ in 0..<self.fieldCount { self.ranges.append(0..<0) }
            return first
        }

        /// `value` for the token's next field (nil or empty: none).
        mutating func append(_ value: String?) {
            guard let value, !value.isEmpty else { return self.ranges.append(0..<0) }
            // A string is valid UTF-8 already: its bytes as they are.
            let start = self.bytes.count
            self.bytes.append(contentsOf: value.utf8)
            self.ranges.append(start..<self.bytes.count)
        }

        /// Keeps the bytes of a value, repaired if they are not UTF-8, and returns where they lie.
        mutating func keep(_ value: UnsafeRawBufferPointer) -> Range<Int> {
            let start = self.bytes.count
            if value.allSatisfy({ $0 < 0x80 }) {
                self.bytes.append(contentsOf: value)
            } else {
                self.bytes.append(contentsOf: String(decoding: value, as: UTF8.self).utf8)
            }
            return start..<self.bytes.count
        }
    }

    /// Decides the layout from the first line that is not blank or a comment; true when that line
    /// was a CSV header (and so holds no token).
    private func decideLayout(_ line: UnsafeRawBufferPointer) throws(AudienceLineError) -> Bool {
        if line.first == UInt8(ascii: "{") {
            self.layout = .jsonLines
            return false
        }
        // A header of one column, `token`, has no comma.
        guard line.contains(UInt8(ascii: ",")) || String(decoding: line, as: UTF8.self).lowercased() == "token" else {
            self.layout = .tokens
            return false
        }
        let columns = try AudienceLine.csvFields(line).map { $0.lowercased() }
        guard let token = columns.firstIndex(of: "token") else {
            throw AudienceLineError(
                "a CSV audience starts with a header line naming its columns, one of them \"token\" (this one names \(columns.joined(separator: ", ")))"
            )
        }
        if let missing = self.fields.first(where: { self.required.contains($0) && !columns.contains($0.lowercased()) }) {
            throw AudienceLineError("the header names no column \"\(missing)\" (it names \(columns.joined(separator: ", "))), which this launch reads")
        }
        let fieldColumns = self.fields.map { columns.firstIndex(of: $0.lowercased()) }
        self.layout = .csv(token: token, fields: fieldColumns)
        self.fieldsOfColumn = columns.indices.map { column in fieldColumns.indices.filter { fieldColumns[$0] == column } }
        return true
    }

    private static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }
}

/// A token file that cannot be read, or a recipient in it that cannot be used: one sentence
/// naming the file (and line).
public struct AudienceFileError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
