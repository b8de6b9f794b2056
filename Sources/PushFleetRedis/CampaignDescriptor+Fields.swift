import Foundation
import PushFleetCore

// MARK: - The `pf:{C}:meta` hash

extension CampaignDescriptor {
    /// Field/value pairs for `HSET`, in order. `collapse_id` is absent when there is none, `kind`
    /// for a campaign (queues published before notifications existed have none); `rate` is there only
    /// for a throttled campaign, `personalized` only for a personalized one.
    var metaFields: [[UInt8]] {
        let d = self.definition
        var pairs: [(String, [UInt8])] = [
            ("id", Array(self.id.uuidString.lowercased().utf8)),
            ("topic", Array(d.topic.utf8)),
            ("environment", Array(d.environment.rawValue.utf8)),
            ("payload", d.payload),
            ("push_type", Array(d.pushType.utf8)),
            ("priority", d.priority.redisArgument),
            ("expiration", d.expiration.redisArgument),
            ("shard_count", self.shardCount.redisArgument),
            ("total_tokens", self.totalTokens.redisArgument),
            ("status", Array(self.status.rawValue.utf8)),
        ]
        if let collapseID = d.collapseID { pairs.append(("collapse_id", Array(collapseID.utf8))) }
        if d.kind != .campaign { pairs.append(("kind", Array(d.kind.rawValue.utf8))) }
        if let rate = d.rateLimit { pairs.append(("rate", rate.redisArgument)) }
        if d.personalized { pairs.append(("personalized", Array("1".utf8))) }
        return pairs.flatMap { [Array($0.0.utf8), $0.1] }
    }

    /// Reads the hash back, throwing the name of the first missing or malformed field.
    init(metaFields fields: [String: [UInt8]]) throws(FieldError) {
        func text(_ name: String) throws(FieldError) -> String {
            guard let bytes = fields[name] else { throw FieldError(name: name) }
            return String(decoding: bytes, as: UTF8.self)
        }
        func number(_ name: String) throws(FieldError) -> Int {
            guard let value = Int(try text(name)) else { throw FieldError(name: name) }
            return value
        }
        guard let id = UUID(uuidString: try text("id")) else { throw FieldError(name: "id") }
        guard let status = CampaignQueueStatus(rawValue: try text("status")) else { throw FieldError(name: "status") }
        guard let environment = APNsEnvironment(rawValue: try text("environment")) else { throw FieldError(name: "environment") }
        guard let payload = fields["payload"] else { throw FieldError(name: "payload") }
        let kind = fields["kind"].map { CampaignKind(rawValue: String(decoding: $0, as: UTF8.self)) } ?? .campaign
        guard let kind else { throw FieldError(name: "kind") }
        let rate = try fields["rate"].map { bytes throws(FieldError) in
            guard let rate = Int(String(decoding: bytes, as: UTF8.self)), rate > 0 else { throw FieldError(name: "rate") }
            return rate
        }
        let definition = CampaignDefinition(
            topic: try text("topic"), environment: environment, payload: payload, pushType: try text("push_type"),
            priority: try number("priority"), expiration: try number("expiration"),
            collapseID: fields["collapse_id"].map { String(decoding: $0, as: UTF8.self) }, kind: kind, rateLimit: rate,
            personalized: fields["personalized"] == Array("1".utf8)
        )
        self.init(id: id, definition: definition, shardCount: try number("shard_count"), totalTokens: try number("total_tokens"), status: status)
    }

    /// A field of `pf:{C}:meta` is missing or malformed.
    struct FieldError: Error {
        let name: String
    }
}
