/// One line of an audience file that carries fields per recipient (`launch --tokens audience.csv`):
/// CSV after a header line naming the columns, one of them `token`, or JSON lines, each an object
/// with a `"token"` member. A plain token file (a token per line) has no fields.
///
/// A record is one line: a quoted CSV field may hold commas and quotes, not a line break.
public enum AudienceLine {
    /// The fields of a CSV line (RFC 4180): separated by commas; a field in double quotes may hold
    /// commas, and `""` for a quote. Spaces around an unquoted field are dropped.
    /// - Throws: ``AudienceLineError`` for a quote that is not closed, or text after a closing quote.
    public static func csvFields(_ line: UnsafeRawBufferPointer) throws(AudienceLineError) -> [String] {
        var fields: [String] = []
        var index = 0
        let end = line.count
        while true {
            while index < end, line[index] == UInt8(ascii: " ") || line[index] == UInt8(ascii: "\t") { index += 1 }
            if index < end, line[index] == UInt8(ascii: "\"") {
                let opening = index
                var field: [UInt8] = []
                index += 1
                while true {
                    guard index < end else {
                        throw AudienceLineError("the quote at column \(opening + 1) is not closed on its line (a field may not hold a line break)")
                    }
                    let byte = line[index]
                    index += 1
                    if byte != UInt8(ascii: "\"") {
                        field.append(byte)
                    } else if index < end, line[index] == UInt8(ascii: "\"") {
                        field.append(byte)
                        index += 1
                    } else {
                        break
                    }
                }
                while index < end, line[index] == UInt8(ascii: " ") || line[index] == UInt8(ascii: "\t") { index += 1 }
                guard index == end || line[index] == UInt8(ascii: ",") else {
                    throw AudienceLineError("text after the quoted field that starts at column \(opening + 1); quote the whole field")
                }
                fields.append(String(decoding: field, as: UTF8.self))
            } else {
                let start = index
                while index < end, line[index] != UInt8(ascii: ",") { index += 1 }
                var last = index
                while last > start, line[last - 1] == UInt8(ascii: " ") || line[last - 1] == UInt8(ascii: "\t") { last -= 1 }
                fields.append(String(decoding: UnsafeRawBufferPointer(rebasing: line[start..<last]), as: UTF8.self))
            }
            if index == end { return fields }
            index += 1  // the comma
        }
    }

    /// A JSON line's token text and the values of `names`: a string as it is, a number as written,
    /// nil for null, an empty string or a missing member (as for an empty CSV field).
    /// - Throws: ``AudienceLineError`` for bad JSON, a line that is not an object, a missing or
    ///   non-string `token`, or a field that is an object, array or boolean.
    public static func jsonFields(_ line: UnsafeRawBufferPointer, names: [String]) throws(AudienceLineError) -> (token: String, values: [String?]) {
        let value: JSONValue
        do {
            value = try JSONParser.parse(line)
        } catch {
            throw AudienceLineError("\(error)")
        }
        guard case .object = value else { throw AudienceLineError("a JSON audience line is an object, such as {\"token\":\"…\",\"locale\":\"fr\"}") }
        guard case .string(let token)? = value["token"] else { throw AudienceLineError("the object has no \"token\" string") }
        var values: [String?] = []
        values.reserveCapacity(names.count)
        for name in names { values.append(try Self.field(name, of: value)) }
        return (token, values)
    }

    /// The value of the member `name` of a recipient's JSON object: its text, a number as written,
    /// nil when it is absent, null or empty.
    /// - Throws: ``AudienceLineError`` for a member of another type.
    public static func field(_ name: String, of object: JSONValue) throws(AudienceLineError) -> String? {
        switch object[name] {
        case nil, .null?: return nil
        case .string(let text)?: return text.isEmpty ? nil : text
        case .number(let text)?: return text
        default: throw AudienceLineError("the member \"\(name)\" is not a string")
        }
    }
}

/// Why a line of an audience file was refused; the reader prefixes the file and line.
public struct AudienceLineError: Error, Hashable, Sendable, CustomStringConvertible {
    public let description: String

    public init(_ description: String) { self.description = description }
}
