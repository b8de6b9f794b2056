import PushFleetCore
import Testing

/// Placeholders in a payload (`{{first_name|there}}`), rendered per recipient: values escaped so
/// that every rendering is JSON, fallbacks for missing values, sizes known without rendering.
@Suite struct PayloadTemplateTests {
    func template(_ text: String) throws -> PayloadTemplate? { try PayloadTemplate(Array(text.utf8)) }

    func rendered(_ template: PayloadTemplate, _ values: [String?]) -> String { String(decoding: template.render(values), as: UTF8.self) }

    @Test func placeholdersInStringsAreRenderedWithTheRecipientsValues() throws {
        let template = try #require(try self.template(#"{"aps":{"alert":"Hi {{ first_name }}, {{offer|20% off}} today, {{first_name}}!"},"n":"{{n}}"}"#))
        #expect(template.fields == ["first_name", "offer", "n"])
        #expect(self.rendered(template, ["Zoë", "free shipping", "7"]) == #"{"aps":{"alert":"Hi Zoë, free shipping today, Zoë!"},"n":"7"}"#)
        // Missing or empty values take the fallback, or nothing.
        #expect(self.rendered(template, [nil, "", nil]) == #"{"aps":{"alert":"Hi , 20% off today, !"},"n":""}"#)
    }

    @Test func valuesAreEscapedSoThatEveryRenderingIsJSON() throws {
        let template = try #require(try self.template(#"{"aps":{"alert":"{{a}}"}}"#))
        let nasty = "say \"hi\"\\\n\t\u{01}}}{{a}}\u{7F}é"
        let bytes = template.render([nasty])
        #expect(String(decoding: bytes, as: UTF8.self) == #"{"aps":{"alert":"say \"hi\"\\\n\t\u0001}}{{a}}"# + "\u{7F}é\"}}")
        let parsed = try JSONParser.parse(bytes)
        #expect(parsed["aps"]?["alert"] == .string(nasty))
        #expect(template.renderedSize([nasty]) == bytes.count)
        #expect(template.renderedSize([nil]) == template.render([nil]).count)
    }

    /// What a shard stores per recipient renders to what the values render to, whatever they hold
    /// (a value of 200 bytes takes a two-byte length), and anything else is refused, not misread.
    @Test func packedValuesRenderAsTheValuesDo() throws {
        let template = try #require(try self.template(#"{"aps":{"alert":"Hi {{first_name|there}}, {{offer}}"}}"#))
        let long = String(repeating: "é\"", count: 70)
        for values in [["Zoë", "free shipping"], [nil, ""], ["say \"hi\"\n", long], ["", "x"]] as [[String?]] {
            let packed = template.pack(values)
            #expect(template.render(packed: packed) == template.render(values), "\(values)")
            #expect(template.renderedSize(packed: packed) == template.render(values).count)
            #expect(template.pack { values[$0] } == (packed, template.render(values).count), "packed with the rendered size")
            #expect(template.render(packed: packed[...]) == template.render(values), "a slice renders too")
        }
        #expect(template.pack(["a", "bc"]) == [1, 0x61, 2, 0x62, 0x63])
        #expect(template.pack([nil, nil]) == [0, 0])
        #expect(Array(template.pack([nil, long]).prefix(3)) == [0, 0x98, 0x02], "280 escaped bytes take two length bytes")
        // Truncated, one field short, a byte too many, a length past the end: refused.
        for bad: [UInt8] in [[], [0], [0, 0, 0], [1, 0x61, 5, 0x62], [0x80], [0x80, 0x80, 0x80, 0x80, 0x80, 0]] {
            #expect(template.render(packed: bad) == nil, "\(bad)")
            #expect(template.renderedSize(packed: bad) == nil, "\(bad)")
        }
    }

    /// A launch packs recipients into one list, each after its length: a packing of 128 bytes
    /// and more takes a two-byte length, and the list reads back as the packings were.
    @Test func aListOfRecipientsKeepsEachPacking() throws {
        let template = try #require(try self.template(#"{"aps":{"alert":"Hi {{first_name|there}}, {{offer}}"}}"#))
        let recipients: [[String?]] = [["Ann", "5"], [nil, String(repeating: "é", count: 100)], ["", ""], ["\"q\"", nil]]
        var list = RecipientValueList()
        for values in recipients {
            let size = list.append(template) { values[$0] }
            #expect(size == template.render(values).count)
        }
        #expect(list.count == recipients.count)
        #expect(list.arrays == recipients.map { template.pack($0) })
        #expect(RecipientValueList(packed: list.bytes) == list)
        #expect(RecipientValueList(packed: list.bytes.dropLast()) == nil, "a truncated list is refused")
    }

    /// Packing from a value's UTF-8 bytes, as a launch from a file does, gives what packing from
    /// the string gives: escapes, two-byte lengths, none for nil or empty.
    @Test func packingFromBytesIsPackingFromStrings() throws {
        let template = try #require(try self.template(#"{"aps":{"alert":"Hi {{first_name|there}}, {{offer}}"}}"#))
        let recipients: [[String?]] = [["Ann", "5"], [nil, String(repeating: "é\"\n", count: 60)], ["", ""], ["\"q\"\t", nil]]
        var fromStrings = RecipientValueList()
        var fromBytes = RecipientValueList()
        for values in recipients {
            let size = fromStrings.append(template) { values[$0] }
            let utf8 = values.map { $0.map { Array($0.utf8) } }
            let sizeFromBytes = utf8.withUnsafeBufferPointers { buffers in fromBytes.append(template, utf8: { buffers[$0] }) }
            #expect(sizeFromBytes == size)
        }
        #expect(fromBytes == fromStrings)
    }

    @Test func aPayloadWithoutPlaceholdersIsNoTemplate() throws {
        #expect(try self.template(#"{"aps":{"alert":"50% off {today}"},"k":{"a":{"b":1}}}"#) == nil)
        // Braces outside strings are JSON's own; an escaped quote does not end the string.
        #expect(try self.template(#"{"a":"\"{{x}}\""}"#)?.fields == ["x"])
    }

    @Test func badPlaceholdersAreRefusedWithTheirPlace() throws {
        #expect(throws: PayloadTemplateError("the placeholder at byte 17 is not closed with }} in its string")) {
            try self.template(#"{"aps":{"alert":"{{name"},"x":"}}"}"#)
        }
        #expect(throws: PayloadTemplateError(#"the placeholder at byte 17 names "first name": a field's name is 1 to 64 letters, digits or _"#)) {
            try self.template(#"{"aps":{"alert":"{{first name}}"}}"#)
        }
        #expect(throws: PayloadTemplateError(#"the placeholder at byte 17 names "": a field's name is 1 to 64 letters, digits or _"#)) {
            try self.template(#"{"aps":{"alert":"{{|x}}"}}"#)
        }
        let key = #"{"aps":{"alert":"x"},"{{k}}" : 1}"#
        #expect(throws: PayloadTemplateError("the placeholder at byte 22 is in a member's name; placeholders go in string values")) {
            try self.template(key)
        }
        #expect(try self.template(#"{"a":"{{k}}","b":["{{k}}"]}"#)?.fields == ["k"], "values in objects and arrays")
        let many = #"{"a":""# + String(repeating: "{{f}}", count: 65) + #""}"#
        #expect(throws: PayloadTemplateError("more than 64 placeholders")) { try self.template(many) }
    }
}

extension Array where Element == [UInt8]? {
    /// Each element's bytes as a buffer (nil stays nil), readable while `body` runs.
    fileprivate func withUnsafeBufferPointers<R>(_ body: ([UnsafeBufferPointer<UInt8>?]) -> R) -> R {
        func pin(_ index: Int, _ pinned: [UnsafeBufferPointer<UInt8>?]) -> R {
            guard index < self.count else { return body(pinned) }
            guard let bytes = self[index] else { return pin(index + 1, pinned + [nil]) }
            return bytes.withUnsafeBufferPointer { pin(index + 1, pinned + [$0]) }
        }
        return pin(0, [])
    }
}
