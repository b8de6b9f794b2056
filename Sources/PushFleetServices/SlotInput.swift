import PushFleetCore

/// What a shard run reacts to: outcomes from the slot's channel, progress of its feeder, a clock
/// tick, and the slot giving its channel up.
enum SlotInput: Sendable {
    case outcomes(ArraySlice<DeliveryOutcome>)
    /// The feeder is about to hand tokens up to (not including) `upTo` to the channel; some may be
    /// written before `send` returns.
    case handing(upTo: Int)
    /// The feeder handed tokens up to (not including) `upTo` to the channel.
    case fed(upTo: Int)
    /// The feeder stopped: the shard is fully fed, or it was told to stop.
    case feedEnded
    /// A fenced read found the lease gone.
    case leaseLost
    case tick
    /// Another run of the slot lost its lease: the channel is being replaced and its unanswered
    /// notifications dropped. Checkpoint, count what was in flight as re-sent, and release.
    case channelReset
}
