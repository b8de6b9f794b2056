public import PushFleetCore

/// Where an audience comes from: a token file, standard input, or the token registry. Batches
/// are read on demand, so the audience is never held in memory.
public protocol TokenSource {
    /// The next tokens, at most `maximum`; empty at the end.
    /// - Throws: an error naming the place of bad input (file and line).
    mutating func next(upTo maximum: Int) async throws -> [DeviceToken]
}
