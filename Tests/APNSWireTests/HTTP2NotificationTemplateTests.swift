import APNSWire
import NIOCore
import NIOHPACK
import PushFleetCore
import Testing

@Suite struct HTTP2NotificationTemplateTests {
    @Test func stableHeadersArePreparedOnce() throws {
        let payload = try Payload(jsonText: Array(#"{"aps":{"alert":"hi"}}"#.utf8), format: .http2)
        let template = HTTP2NotificationTemplate(
            topic: "com.example.app", pushType: "alert", priority: 5, expiration: 1_700_000_000, collapseID: "sale", payload: payload
        )
        #expect(template.pseudoHeaders.first(name: ":method") == "POST")
        #expect(template.pseudoHeaders.first(name: ":scheme") == "https")
        #expect(template.headers.first(name: "apns-topic") == "com.example.app")
        #expect(template.headers.first(name: "apns-push-type") == "alert")
        #expect(template.headers.first(name: "apns-priority") == "5")
        #expect(template.headers.first(name: "apns-expiration") == "1700000000")
        #expect(template.headers.first(name: "apns-collapse-id") == "sale")
        #expect(template.headers.first(name: "content-length") == String(payload.byteCount))
        #expect(template.headers.first(name: "authorization") == nil)
        #expect(template.payload == ByteBuffer(bytes: payload.bytes))
    }

    @Test func optionalHeadersAreLeftOut() {
        let template = HTTP2NotificationTemplate(topic: "t", payload: ByteBuffer(string: "{}"))
        #expect(template.headers.first(name: "apns-expiration") == nil)
        #expect(template.headers.first(name: "apns-collapse-id") == nil)
        #expect(template.headers.first(name: "apns-priority") == "10")
    }

    @Test func pathIsTheLowercaseHexToken() throws {
        let token = try DeviceToken(hex: "00FF10ab")
        #expect(HTTP2NotificationTemplate.path(for: token) == "/3/device/00ff10ab")
    }

    @Test func templatesAreEqualOnlyToThemselves() {
        let a = HTTP2NotificationTemplate(topic: "t", payload: ByteBuffer(string: "{}"))
        let b = HTTP2NotificationTemplate(topic: "t", payload: ByteBuffer(string: "{}"))
        #expect(a == a)
        #expect(a != b)
    }
}
