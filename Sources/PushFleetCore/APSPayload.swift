/// A builder for the `aps` dictionary and custom keys of a notification payload.
///
/// ```swift
/// var payload = APSPayload(alert: .text("Ding dong"))
/// payload.badge = 1
/// payload.sound = "default"
/// payload.custom = [("door", .string("front"))]
/// let bytes = try payload.payload(for: .binaryFrame)   // {"aps":{"alert":"Ding dong","badge":1,"sound":"default"},"door":"front"}
/// ```
public struct APSPayload: Hashable, Sendable {
    /// The `alert` member: a plain string or a dictionary.
    public enum Alert: Hashable, Sendable {
        case text(String)
        case dictionary(AlertDictionary)
    }

    /// The members of an alert dictionary that Apple documents. Unset members are left out.
    public struct AlertDictionary: Hashable, Sendable {
        public var title: String?
        public var subtitle: String?
        public var body: String?
        public var launchImage: String?
        public var titleLocKey: String?
        public var titleLocArgs: [String]?
        public var locKey: String?
        public var locArgs: [String]?

        public init(title: String? = nil, subtitle: String? = nil, body: String? = nil) {
            self.title = title
            self.subtitle = subtitle
            self.body = body
        }
    }

    public var alert: Alert?
    public var badge: Int?
    public var sound: String?
    public var contentAvailable: Bool
    public var mutableContent: Bool
    public var category: String?
    public var threadID: String?
    /// Members beside `aps`, in order. A custom key named `aps` is ignored.
    public var custom: [(key: String, value: JSONValue)]

    public init(
        alert: Alert? = nil,
        badge: Int? = nil,
        sound: String? = nil,
        contentAvailable: Bool = false,
        mutableContent: Bool = false,
        category: String? = nil,
        threadID: String? = nil,
        custom: [(key: String, value: JSONValue)] = []
    ) {
        self.alert = alert
        self.badge = badge
        self.sound = sound
        self.contentAvailable = contentAvailable
        self.mutableContent = mutableContent
        self.category = category
        self.threadID = threadID
        self.custom = custom
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.jsonValue == rhs.jsonValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(self.jsonValue) }

    /// The payload as a JSON object: `aps` first, then the custom keys.
    public var jsonValue: JSONValue {
        var aps: [(key: String, value: JSONValue)] = []
        switch self.alert {
        case .text(let text): aps.append(("alert", .string(text)))
        case .dictionary(let dictionary): aps.append(("alert", dictionary.jsonValue))
        case nil: break
        }
        if let badge = self.badge { aps.append(("badge", .integer(badge))) }
        if let sound = self.sound { aps.append(("sound", .string(sound))) }
        if self.contentAvailable { aps.append(("content-available", .integer(1))) }
        if self.mutableContent { aps.append(("mutable-content", .integer(1))) }
        if let category = self.category { aps.append(("category", .string(category))) }
        if let threadID = self.threadID { aps.append(("thread-id", .string(threadID))) }
        var members: [(key: String, value: JSONValue)] = [("aps", .object(aps))]
        members.append(contentsOf: self.custom.filter { $0.key != "aps" })
        return .object(members)
    }

    /// Serializes and checks the payload for `format`.
    public func payload(for format: PayloadFormat) throws(PayloadError) -> Payload {
        try Payload(self.jsonValue, format: format)
    }
}

extension APSPayload.AlertDictionary {
    var jsonValue: JSONValue {
        var members: [(key: String, value: JSONValue)] = []
        func add(_ key: String, _ value: String?) { if let value { members.append((key, .string(value))) } }
        func add(_ key: String, _ values: [String]?) { if let values { members.append((key, .array(values.map(JSONValue.string)))) } }
        add("title", self.title)
        add("subtitle", self.subtitle)
        add("body", self.body)
        add("launch-image", self.launchImage)
        add("title-loc-key", self.titleLocKey)
        add("title-loc-args", self.titleLocArgs)
        add("loc-key", self.locKey)
        add("loc-args", self.locArgs)
        return .object(members)
    }
}
