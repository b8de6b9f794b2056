public import PushFleetCore

extension WorkerService {
    /// How a worker claims and paces work. Every default is stated with its unit.
    public struct Configuration: Sendable {
        /// Campaigns of this topic and environment are served.
        public var topic: String
        public var environment: APNsEnvironment
        /// Names this worker in lease owners and logs. Defaults to host, pid and a random suffix.
        public var workerID: String
        /// Slots, each with its own connection. Defaults to 4.
        public var connections: Int
        /// Shards of one campaign a slot works at once over its connection. Defaults to 4. Over the
        /// binary protocol a slot takes more while its channel wants more tokens on hand
        /// (``DeliveryChannel/tokensWanted``: enough for a proof round to outlast the gateway's
        /// error delay, at most the sender's `confirmEvery`). A crash re-sends at most the
        /// unsettled tokens of the shards a slot works.
        public var shardsPerConnection: Int
        /// A shard's lease, renewed by every checkpoint. Defaults to 30,000 ms.
        public var leaseMilliseconds: Int
        /// Checkpoint after this many outcomes. Defaults to 100.
        public var checkpointEvery: Int
        /// Checkpoint (and so heartbeat) at least this often. Defaults to 1 second.
        public var checkpointInterval: Duration
        /// Tokens read from a shard at a time. Defaults to 500.
        public var readWindow: Int
        /// How long to wait before looking for work again when there is none. Defaults to 250 ms.
        public var idlePoll: Duration
        /// How long a drain (SIGTERM) waits for outcomes of what was already sent. Defaults to 20 s.
        public var drainTimeout: Duration
        /// Names the credentials in a pause reason (`team ABC123DEFG, key ABC123DEFG`), never a
        /// secret. Defaults to none.
        public var credentials: String?
        /// Whether the worker serves its topic's notification lane (doorbell rings) over a
        /// connection of its own besides its slots. Defaults to true.
        public var servesNotifications = true
        /// Notifications the lane works at once. Defaults to 32.
        public var notificationRuns = 32

        public init(
            topic: String,
            environment: APNsEnvironment,
            workerID: String = WorkerService.defaultWorkerID(),
            connections: Int = 4,
            shardsPerConnection: Int = 4,
            leaseMilliseconds: Int = 30_000,
            checkpointEvery: Int = 100,
            checkpointInterval: Duration = .seconds(1),
            readWindow: Int = 500,
            idlePoll: Duration = .milliseconds(250),
            drainTimeout: Duration = .seconds(20)
        ) {
            self.topic = topic
            self.environment = environment
            self.workerID = workerID
            self.connections = max(1, connections)
            self.shardsPerConnection = max(1, shardsPerConnection)
            self.leaseMilliseconds = leaseMilliseconds
            self.checkpointEvery = max(1, checkpointEvery)
            self.checkpointInterval = checkpointInterval
            self.readWindow = max(1, readWindow)
            self.idlePoll = idlePoll
            self.drainTimeout = drainTimeout
            self.credentials = nil
        }
    }
}
