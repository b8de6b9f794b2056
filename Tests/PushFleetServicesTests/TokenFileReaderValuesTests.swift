import Foundation
import PushFleetCore
import PushFleetTestSupport
import Testing
@testable import PushFleetServices

/// The values a ``TokenFileReader`` keeps for a batch's recipients, as strings and as the UTF-8 a
/// personalized launch packs from: the same for unquoted and quoted CSV lines and JSON lines, none
/// for an empty or missing field, invalid UTF-8 repaired as a string would be.
@Suite struct TokenFileReaderValuesTests {
    private func reader(_ bytes: [UInt8], fields: [String]) throws -> (TokenFileReader, String) {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pushfleet-values-\(UUID().uuidString).csv").path
        #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        return (try TokenFileReader(path: path, fields: fields), path)
    }

    /// Every value of the last batch, read through ``TokenFileReader/withBatchValues(_:)``.
    private func utf8Values(_ reader: TokenFileReader, count: Int) -> [[String?]] {
        reader.withBatchValues { values in
            (0..<count).map { index in
                (0..<reader.fields.count).map { field in values[token: index, field: field].map { String(decoding: $0, as: UTF8.self) } }
            }
        }
    }

    private func stringValues(_ reader: TokenFileReader, count: Int) -> [[String?]] {
        (0..<count).map { index in (0..<reader.fields.count).map { reader.value($0, ofTokenAt: index) } }
    }

    @Test func csvLinesQuotedOrNotGiveTheSameValues() throws {
        let (a, b, c) = (TestTokens.token(1).hexString, TestTokens.token(2).hexString, TestTokens.token(3).hexString)
        let text = """
            offer,Token,first_name,unused
            10% off,\(a),Ann,x
            "say ""hi"", now",\(b),,x
             , \(c) ,Zoë ,x
            """
        let (reader, path) = try self.reader(Array(text.utf8), fields: ["first_name", "offer", "missing", "token"])
        defer { try? FileManager.default.removeItem(atPath: path) }
        let tokens = try reader.read(upTo: 10)
        #expect(tokens == [TestTokens.token(1), TestTokens.token(2), TestTokens.token(3)])
        let expected: [[String?]] = [
            ["Ann", "10% off", nil, a],
            [nil, "say \"hi\", now", nil, b],
            ["Zoë", nil, nil, c],
        ]
        #expect(self.stringValues(reader, count: 3) == expected)
        #expect(self.utf8Values(reader, count: 3) == expected)
    }

    /// The last column, a trailing comma, a line shorter than its header, a column that fills two
    /// fields (its name given twice in another case), quoted or not.
    @Test func lastColumnsAndShortLines() throws {
        let (a, b, c) = (TestTokens.token(1).hexString, TestTokens.token(2).hexString, TestTokens.token(3).hexString)
        let text = """
            token,first_name,offer
            \(a),Ann,5% off
            \(b),Bo,
            \(c)
            \(a),"Cy","7"
            """
        let (reader, path) = try self.reader(Array(text.utf8), fields: ["offer", "first_name", "OFFER"])
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(try reader.read(upTo: 10).count == 4)
        let expected: [[String?]] = [["5% off", "Ann", "5% off"], [nil, "Bo", nil], [nil, nil, nil], ["7", "Cy", "7"]]
        #expect(self.stringValues(reader, count: 4) == expected)
        #expect(self.utf8Values(reader, count: 4) == expected)
        #expect((0..<4).map { reader.lineOf(tokenAtBatchIndex: $0) } == [2, 3, 4, 5])
    }

    @Test func jsonLinesAndInvalidUTF8() throws {
        let token = TestTokens.token(7).hexString
        var bytes = Array("token,name\n\(token),Ren".utf8)
        bytes += [0xFF, 0x0A]
        bytes += Array("\(TestTokens.token(8).hexString),Ada\n".utf8)
        let (reader, path) = try self.reader(bytes, fields: ["name"])
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(try reader.read(upTo: 1).count == 1)
        // As a string would hold it: the bad byte becomes U+FFFD, and the bytes are valid UTF-8.
        #expect(self.utf8Values(reader, count: 1) == [["Ren\u{FFFD}"]])
        #expect(reader.withBatchValues { values in values[token: 0, field: 0].map { Array($0) } } == Array("Ren\u{FFFD}".utf8))
        // The next batch holds its own values only.
        #expect(try reader.read(upTo: 10).count == 1)
        #expect(self.stringValues(reader, count: 1) == [["Ada"]])

        let lines = """
            {"token":"\(token)","name":"Kai","age":41}
            {"token":"\(token)","name":""}
            """
        let (json, jsonPath) = try self.reader(Array(lines.utf8), fields: ["name", "age"])
        defer { try? FileManager.default.removeItem(atPath: jsonPath) }
        #expect(try json.read(upTo: 10).count == 2)
        #expect(self.utf8Values(json, count: 2) == [["Kai", "41"], [nil, nil]])
    }

    @Test func aPlainTokenFileHasNoValues() throws {
        let (reader, path) = try self.reader(Array("\(TestTokens.token(1).hexString)\n".utf8), fields: ["name"])
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(try reader.read(upTo: 10).count == 1)
        #expect(self.utf8Values(reader, count: 1) == [[nil]])
    }
}
