import APNSTransport

/// What a worker slot reacts to: outcomes from its sender, progress of its feeder, and a clock tick.
enum SlotInput: Sendable {
    case outcome(BinarySender.Event)
    /// The feeder of shard run `run` handed tokens up to (not including) `index` to the sender.
    case fed(run: UInt64, upTo: Int)
    /// The feeder of shard run `run` stopped: the shard is fully fed, or it was told to stop.
    case feedEnded(run: UInt64)
    /// A fenced read found the lease gone.
    case leaseLost(run: UInt64)
    case tick
}
