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
        let many = #"{"a":""# + String(repeating: "{{f}}", count: 65) + #""}"#
        #expect(throws: PayloadTemplateError("more than 64 placeholders")) { try self.template(many) }
    }
}
