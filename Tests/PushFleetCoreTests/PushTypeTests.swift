import PushFleetCore
import Testing

@Suite struct PushTypeTests {
    @Test func everyPushTypeFitsItsOwnTopicAndNoOther() {
        let bundle = "com.example.app"
        let topics = APNsPushType.all.map { ($0, bundle + (APNsPushType.topicSuffix(for: $0) ?? "")) }
        for (pushType, topic) in topics {
            for (otherType, otherTopic) in topics {
                let mismatch = APNsPushType.mismatch(topic: otherTopic, pushType: pushType)
                let fits = otherTopic == topic
                #expect((mismatch == nil) == fits, "\(pushType) to \(otherTopic) (made for \(otherType)): \(mismatch ?? "fits")")
            }
        }
    }

    @Test func aTopicThatIsOnlyASuffixHasNoApp() {
        #expect(APNsPushType.mismatch(topic: ".voip", pushType: "voip") == "the topic .voip has no bundle ID before .voip")
    }

    @Test func noSuffixEndsAnother() {
        for (_, suffix) in APNsPushType.topicSuffixes {
            #expect(APNsPushType.topicSuffixes.filter { suffix.hasSuffix($0.suffix) }.count == 1, "\(suffix)")
        }
    }
}
