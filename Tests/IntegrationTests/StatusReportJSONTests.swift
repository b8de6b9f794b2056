import Foundation
import PushFleetCore
import PushFleetPostgres
import PushFleetServices
import Testing

/// The JSON of `status --json` as ``PushFleetJSON`` writes it: every field, `null` for what a
/// campaign lacks, keys in order, rate and ETA to a tenth.
@Suite struct StatusReportJSONTests {
    @Test func aRunningCampaignHasEveryFieldAndNullsForWhatItLacks() throws {
        let id = try #require(UUID(uuidString: "6F1C2D3E-0000-4000-8000-000000000001"))
        let created = Date(timeIntervalSince1970: 1_800_000_000)
        let started = created.addingTimeInterval(60)
        let record = CampaignRecord(
            id: id, topic: "com.example.shop", environment: .production, state: .running, total: 21, shardCount: 3, accepted: 7,
            rejected: ["Unregistered": 2, "BadDeviceToken": 1], doneShards: 1, createdAt: created, startedAt: started
        )
        // 10 settled in 4 seconds: 2.5 a second, 11 pending for 4.4 seconds more.
        let json = StatusReport(record: record, now: started.addingTimeInterval(4)).json
        #expect(
            json == #"{"accepted":7,"cancelled":0,"created_at":"2027-01-15T08:00:00Z","dead_shards":[],"duplicates_dropped":0,"#
                + #""environment":"production","eta_seconds":4.4,"finished_at":null,"id":"6f1c2d3e-0000-4000-8000-000000000001","#
                + #""pending":11,"rate":2.5,"rate_limit":null,"reason":null,"rejected":{"BadDeviceToken":1,"Unregistered":2},"#
                + #""resent":0,"resumes_at":null,"retried":0,"shards":3,"shards_done":1,"split_id":null,"#
                + #""started_at":"2027-01-15T08:01:00Z","starts_at":null,"state":"running","topic":"com.example.shop","total":21,"variant":null}"#
        )
    }

    @Test func numbersToSomePlacesAreWrittenAsJustThoseDigits() {
        let numbers = [
            PushFleetJSON.rounded(12.34, places: 1), PushFleetJSON.rounded(0.1 + 0.2, places: 1), PushFleetJSON.rounded(7, places: 1),
            PushFleetJSON.rounded(2.0 / 3, places: 3), PushFleetJSON.rounded(1234.5678, places: 0),
        ]
        #expect(PushFleetJSON.encode(numbers) == "[12.3,0.3,7,0.667,1235]")
    }

    @Test func stringsAreEscapedAndSlashesLeftAsTheyAre() throws {
        let text = "say \"hi\"\\\n\u{1}/v1/campaigns/é"
        let json = PushFleetJSON.encode(["b": text, "a": "x"])
        #expect(json.hasPrefix(#"{"a":"x","b":"say \"hi\"\\\n\u0001/v1/campaigns/é"#))
        let parsed = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: String]
        #expect(parsed?["b"] == text)
    }
}
