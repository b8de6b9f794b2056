/// APNs' `apns-push-type` values and the topic each is sent to: the app's bundle ID, plus a suffix
/// for the push types that have their own tokens (a VoIP token is registered for `<bundle>.voip`
/// only). Apple's list, from "Sending notification requests to APNs".
public enum APNsPushType {
    /// Every value APNs accepts.
    public static let all: Set<String> = [
        "alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity", "pushtotalk", "widgets",
    ]

    /// The push types whose topic is the bundle ID plus a suffix, with that suffix. `alert`,
    /// `background` and `mdm` use the bare topic. No suffix is the end of another.
    public static let topicSuffixes: [(pushType: String, suffix: String)] = [
        ("voip", ".voip"), ("complication", ".complication"), ("fileprovider", ".pushkit.fileprovider"),
        ("location", ".location-query"), ("liveactivity", ".push-type.liveactivity"), ("pushtotalk", ".voip-ptt"),
        ("widgets", ".push-type.widgets"),
    ]

    /// The suffix `pushType`'s topic must end in, if it needs one.
    public static func topicSuffix(for pushType: String) -> String? {
        self.topicSuffixes.first { $0.pushType == pushType }?.suffix
    }

    /// The push type whose suffix `topic` ends in, if any.
    public static func suffixedPushType(of topic: String) -> (pushType: String, suffix: String)? {
        self.topicSuffixes.first { topic.hasSuffix($0.suffix) }
    }

    /// Why a notification of `pushType` cannot go to `topic`, or `nil` if it can.
    public static func mismatch(topic: String, pushType: String) -> String? {
        if let required = self.topicSuffix(for: pushType), !topic.hasSuffix(required) {
            return "push type \(pushType) goes to the topic <bundle ID>\(required), not \(topic)"
        }
        if let suffixed = self.suffixedPushType(of: topic), suffixed.pushType != pushType {
            return "the topic \(topic) is for push type \(suffixed.pushType), not \(pushType)"
        }
        if let suffix = self.topicSuffix(for: pushType), topic.utf8.count == suffix.utf8.count {
            return "the topic \(topic) has no bundle ID before \(suffix)"
        }
        return nil
    }
}
