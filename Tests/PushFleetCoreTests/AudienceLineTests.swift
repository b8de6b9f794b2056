import PushFleetCore
import Testing

/// Lines of an audience file with fields: CSV as RFC 4180 writes it, and JSON lines.
@Suite struct AudienceLineTests {
    func csv(_ line: String) throws -> [String] {
        var fields: [String] = []
        try Array(line.utf8).withUnsafeBytes { bytes in fields = try AudienceLine.csvFields(bytes) }
        return fields
    }

    func json(_ line: String, _ names: [String]) throws -> (token: String, values: [String?]) {
        var token = ""
        var values: [String?] = []
        try Array(line.utf8).withUnsafeBytes { bytes in
            let parsed = try AudienceLine.jsonFields(bytes, names: names)
            token = parsed.token
            values = parsed.values
        }
        return (token, values)
    }

    @Test func csvFieldsAreSplitAtCommasOutsideQuotes() throws {
        #expect(try self.csv("ab12,fr,Europe/Paris") == ["ab12", "fr", "Europe/Paris"])
        #expect(try self.csv(" ab12 , fr ,x") == ["ab12", "fr", "x"])
        #expect(try self.csv(#"ab12,"Dupont, Jean","say ""hi""""#) == ["ab12", "Dupont, Jean", #"say "hi""#])
        #expect(try self.csv("ab12,,") == ["ab12", "", ""])
        #expect(try self.csv(#"ab12,"""#) == ["ab12", ""])
        #expect(try self.csv("ab12,Zoë") == ["ab12", "Zoë"])
        #expect(try self.csv("token") == ["token"])
    }

    @Test func badCSVIsRefusedWithItsColumn() throws {
        #expect(throws: AudienceLineError("the quote at column 6 is not closed on its line (a field may not hold a line break)")) {
            try self.csv(#"ab12,"open"#)
        }
        #expect(throws: AudienceLineError("text after the quoted field that starts at column 6; quote the whole field")) {
            try self.csv(#"ab12,"a"b,c"#)
        }
    }

    @Test func jsonLinesGiveTheTokenAndTheFieldsAsked() throws {
        let line = #"{"token":"ab12","locale":"pt_BR","time_zone":null,"visits":3}"#
        let (token, values) = try self.json(line, ["locale", "time_zone", "visits", "missing"])
        #expect(token == "ab12")
        #expect(values == ["pt_BR", nil, "3", nil])
    }

    @Test func badJSONLinesAreRefused() throws {
        #expect(throws: AudienceLineError.self) { try self.json(#"{"token":"ab12""#, []) }
        #expect(throws: AudienceLineError(#"a JSON audience line is an object, such as {"token":"…","locale":"fr"}"#)) { try self.json(#"["ab12"]"#, []) }
        #expect(throws: AudienceLineError(#"the object has no "token" string"#)) { try self.json(#"{"token":12}"#, []) }
        #expect(throws: AudienceLineError(#"the member "locale" is not a string"#)) { try self.json(#"{"token":"ab","locale":["fr"]}"#, ["locale"]) }
    }
}
