import PushFleetCore
import PushFleetServices

/// A token file (or standard input) as a launch audience; errors name the file and line.
struct FileTokenSource: TokenSource {
    let reader: TokenFileReader
    /// Required size of every token in bytes (32 for the binary protocol), or `nil`.
    let requiredSize: Int?

    mutating func next(upTo maximum: Int) async throws -> [DeviceToken] {
        let tokens = try self.reader.read(upTo: maximum)
        if let required = self.requiredSize, let wrong = tokens.firstIndex(where: { $0.count != required }) {
            throw CLIError("\(self.reader.path):\(self.reader.lineOf(tokenAtBatchIndex: wrong)): \(DeviceTokenError.wrongSize(byteCount: tokens[wrong].count, required: required, protocolName: "binary protocol"))")
        }
        return tokens
    }
}

/// The active tokens of a topic and environment in the registry, page by page.
struct RegistryTokenSource: TokenSource {
    let store: CampaignStorePager
    var after: DeviceToken? = nil

    mutating func next(upTo maximum: Int) async throws -> [DeviceToken] {
        let tokens = try await self.store.page(after: self.after, limit: maximum)
        self.after = tokens.last
        return tokens
    }
}

/// Reads registry pages for one topic and environment.
struct CampaignStorePager: Sendable {
    let page: @Sendable (DeviceToken?, Int) async throws -> [DeviceToken]
    func page(after: DeviceToken?, limit: Int) async throws -> [DeviceToken] { try await self.page(after, limit) }
}
