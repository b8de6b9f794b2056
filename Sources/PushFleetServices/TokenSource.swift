public import PushFleetCore

/// Where an audience comes from: a token file, standard input, or the token registry. Batches
/// are read on demand, so the audience is never held in memory.
public protocol TokenSource {
    /// The next tokens, at most `maximum`; empty at the end.
    /// - Throws: an error naming the place of bad input (file and line).
    mutating func next(upTo maximum: Int) async throws -> [DeviceToken]
    /// A personalized audience's: each recipient's packed values (``PayloadTemplate/pack(_:)``)
    /// for the tokens of the last batch, in order; nil for any other audience.
    var batchValues: RecipientValueList? { get }
}


#if compiler(>=6.2)
/// A source ``PrefetchingTokenSource`` reads on another task: its type, which that task uses, may
/// cross tasks (`SendableMetatype`, Swift 6.2 on; every non-isolated type's may).
public typealias PrefetchableTokenSource = TokenSource & SendableMetatype
#else
public typealias PrefetchableTokenSource = TokenSource
#endif

/// A token source read one batch ahead on another thread: while the launch files one batch
/// (duplicates, shards, staging), the next is read, parsed and packed. A launch from a file is
/// otherwise bound by one core, and reading is a good part of it.
///
/// The inner source is used by one task at a time (a read starts only after the previous one
/// ended), so it need not be `Sendable`.
public struct PrefetchingTokenSource<Inner: PrefetchableTokenSource>: TokenSource {
    private final class Box: @unchecked Sendable {
        var inner: Inner
        init(_ inner: Inner) { self.inner = inner }
    }

    private struct Batch: Sendable {
        var tokens: [DeviceToken]
        var values: RecipientValueList?
    }

    private let box: Box
    private let size: Int
    private var ahead: Task<Batch, any Error>?
    public private(set) var batchValues: RecipientValueList?

    /// - Parameter size: the batch read ahead; ``next(upTo:)`` returns batches of at most this many.
    public init(_ inner: Inner, batch size: Int = 4_096) {
        self.box = Box(inner)
        self.size = size
    }

    public mutating func next(upTo maximum: Int) async throws -> [DeviceToken] {
        let read = self.ahead ?? Self.read(self.box, self.size)
        let batch = try await read.value
        self.batchValues = batch.values
        // Read on while this batch is filed; nothing more after the end.
        self.ahead = batch.tokens.isEmpty ? nil : Self.read(self.box, self.size)
        precondition(batch.tokens.count <= maximum, "a prefetching source is read in batches of at most its own size")
        return batch.tokens
    }

    private static func read(_ box: Box, _ size: Int) -> Task<Batch, any Error> {
        Task.detached {
            let tokens = try await box.inner.next(upTo: size)
            return Batch(tokens: tokens, values: box.inner.batchValues)
        }
    }
}
