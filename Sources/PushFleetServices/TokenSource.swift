public import PushFleetCore

/// Where an audience comes from: a token file, standard input, or the token registry. Batches
/// are read on demand, so the audience is never held in memory.
public protocol TokenSource {
    /// The next tokens, at most `maximum`; empty at the end.
    /// - Throws: an error naming the place of bad input (file and line).
    mutating func next(upTo maximum: Int) async throws -> [DeviceToken]
    /// A personalized audience's: each recipient's packed values (``PayloadTemplate/pack(_:)``)
    /// for the tokens of the last batch, in order; nil for any other audience.
    var batchValues: [[UInt8]]? { get }
}

extension TokenSource {
    public var batchValues: [[UInt8]]? { nil }
}
