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
