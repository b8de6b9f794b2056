public import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A blocking connection to Redis, standalone or Redis Cluster, for use from a single thread.
///
/// The first command asks the configured server for `CLUSTER SLOTS`. A standalone Redis refuses,
/// and every command goes to it over one hiredis connection. A cluster node answers with the slot
/// map: each command then goes to the master serving its key's slot (see ``RedisRoute``), over one
/// connection per master; `MOVED` updates the map and sends the command again, `ASK` sends it once
/// more after `ASKING`, `TRYAGAIN` (a multi-key command while its slot migrates) sends it again
/// after a short wait, and the whole map is read again after a `MOVED` or a failed node. A
/// pipeline is split per node and its replies put back in order; commands on one key keep their
/// order, commands on different slots may run in another order than given. Scripts and multi-key
/// commands must keep their keys in one slot, which PushFleet's `{campaign}` hash tags do.
///
/// Failures follow the rules of one connection: an I/O error, timeout or protocol error closes
/// that node's connection, the call throws and is not retried (a command may have run); an error
/// *reply* is a ``RedisReply/error(_:)`` and leaves the connection usable. Redirects and
/// `TRYAGAIN` are the only replies acted on here: they mean the command did not run.
///
/// Not `Sendable`: hiredis contexts are not thread-safe. ``RedisClient`` confines one to its thread.
public final class RedisConnection {
    /// The configured server: a standalone Redis, or the cluster node the slot map is first read from.
    public let configuration: RedisConfiguration
    let logger: Logger
    private let seed: RedisNode
    private var topology = Topology.unknown
    private var map = RedisClusterMap()
    /// The connection to each cluster master, by the address the cluster gives it.
    private var nodes: [RedisClusterMap.Address: RedisNode] = [:]
    /// Whether the map may be out of date (a redirect or a failed node); read again before the next call.
    private var mapIsStale = false
    /// Whether `CLUSTER SLOTS` was refused (an ACL): the map is then learnt from `MOVED` alone.
    private var slotsRefused = false
    private var lastRefresh: ContinuousClock.Instant?
    /// `host:port` of the node that answered last, as messages about its replies name it.
    private(set) var lastServer: String
    /// How many `MOVED` and `ASK` replies were followed (for tests).
    private(set) var redirectsFollowed = 0

    private enum Topology { case unknown, standalone, cluster }

    /// At most this many redirects are followed for one command.
    static let maximumRedirects = 5
    /// The map is read again at most this often when nodes keep failing.
    static let refreshInterval = Duration.seconds(1)

    /// Creates a connection that connects on its first command.
    /// - Parameters:
    ///   - configuration: Where the server is; see ``RedisConfiguration``. On a cluster, any node.
    ///   - logger: Receives connects (debug), topology changes (debug) and connection failures (warning).
    public init(configuration: RedisConfiguration, logger: Logger = Logger(label: "pushfleet.redis")) {
        self.configuration = configuration
        self.logger = logger
        self.seed = RedisNode(configuration: configuration, logger: logger)
        self.lastServer = configuration.server
    }

    /// Whether any connection is open. A closed connection reconnects on its next command.
    public var isConnected: Bool { self.seed.isConnected || self.nodes.values.contains { $0.isConnected } }

    /// Whether the server turned out to be a Redis Cluster (false until the first command).
    public var isCluster: Bool { self.topology == .cluster }

    /// The masters of the cluster as `host:port`, from the last slot map read (empty when standalone).
    public var clusterMasters: [String] { self.map.masters.map(\.description) }

    /// Closes every connection now; the next command opens what it needs.
    public func close() {
        self.seed.close()
        for node in self.nodes.values { node.close() }
    }

    /// Sends one command and waits for its reply.
    /// - Parameter arguments: The command name and its arguments, each sent as raw bytes. Not empty.
    /// - Returns: The reply; an error reply is `.error`, not a thrown error.
    /// - Throws: ``RedisError`` when the server cannot be reached or the connection fails, or
    ///   (on a cluster) when the command cannot be routed or keeps being redirected.
    public func command(_ arguments: [[UInt8]]) throws(RedisError) -> RedisReply {
        precondition(!arguments.isEmpty, "a Redis command needs at least its name")
        // A node that does not hold a SCAN's slot answers it (with nothing), not with MOVED: scan
        // only by an up-to-date map.
        if try self.prepare(for: arguments) == .standalone {
            let reply = try self.seed.command(arguments)
            guard RedisRedirect(reply, askedHost: self.seed.configuration.host) != nil else { return reply }
            // A cluster that would not show its map (CLUSTER refused by an ACL): learn it from redirects.
            self.becomeCluster(because: "it answered with a redirect")
        }
        return try self.clusterCommand(arguments)
    }

    /// Sends one command built from mixed values: `connection.command("HGET", key, field)`.
    public func command(_ parts: any RedisArgumentConvertible...) throws(RedisError) -> RedisReply {
        try self.command(parts.map(\.redisArgument))
    }

    /// ``pipeline(_:)-([[[UInt8]]])`` of commands written already (``RedisCommands``): to a
    /// standalone server as they are; to a cluster read back and routed one by one.
    public func pipeline(_ commands: RedisCommands) throws(RedisError) -> [RedisReply] {
        guard !commands.isEmpty else { return [] }
        let node: RedisNode
        if try self.prepare() == .standalone {
            node = self.seed
        } else {
            // As they are when all go to one node (a campaign's keys share a slot), else one by one.
            var nodes: [RedisNode] = []
            for index in 0..<commands.count {
                let name = commands.arguments(of: index, upTo: 1)
                nodes.append(try self.node(for: commands.arguments(of: index, upTo: RedisRoute.argumentsNeeded(name: name[0]))))
            }
            guard nodes.allSatisfy({ $0 === nodes[0] }) else { return try self.pipeline(commands.arguments) }
            node = nodes[0]
        }
        let replies = try self.send(to: node) { node throws(RedisError) in try node.pipeline(commands) }
        if self.topology == .standalone {
            guard replies.contains(where: { RedisRedirect($0, askedHost: node.configuration.host) != nil }) else { return replies }
            self.becomeCluster(because: "it answered with a redirect")
        }
        return try self.redirected(commands.arguments(of:), replies: replies, askedNodes: Array(repeating: node, count: commands.count))
    }

    /// Sends many commands in one write per node and reads all their replies, in order.
    ///
    /// Replies wait in the server's memory until read, so keep pipelines to thousands of commands.
    /// - Parameter commands: Each command's name and arguments. May be empty.
    /// - Returns: One reply per command, in the order given; error replies are `.error` values.
    /// - Throws: ``RedisError`` when a connection fails; no reply of the pipeline is returned then.
    public func pipeline(_ commands: [[[UInt8]]]) throws(RedisError) -> [RedisReply] {
        guard !commands.isEmpty else { return [] }
        if try self.prepare() == .standalone {
            let replies = try self.seed.pipeline(commands)
            guard replies.contains(where: { RedisRedirect($0, askedHost: self.seed.configuration.host) != nil }) else {
                return replies
            }
            self.becomeCluster(because: "it answered with a redirect")
            return try self.redirected({ commands[$0] }, replies: replies, askedNodes: Array(repeating: self.seed, count: commands.count))
        }

        // One pipeline per node, in the order each node is first needed.
        var batches: [(node: RedisNode, indices: [Int])] = []
        var batchOfNode: [ObjectIdentifier: Int] = [:]
        for (index, command) in commands.enumerated() {
            let node = try self.node(for: command)
            if let batch = batchOfNode[ObjectIdentifier(node)] {
                batches[batch].indices.append(index)
            } else {
                batchOfNode[ObjectIdentifier(node)] = batches.count
                batches.append((node, [index]))
            }
        }
        var replies = [RedisReply](repeating: .null, count: commands.count)
        var askedNodes = [RedisNode](repeating: self.seed, count: commands.count)
        for batch in batches {
            let answers = try self.send(to: batch.node) { node throws(RedisError) in
                try node.pipeline(batch.indices.map { commands[$0] })
            }
            for (answer, index) in zip(answers, batch.indices) {
                replies[index] = answer
                askedNodes[index] = batch.node
            }
        }
        return try self.redirected({ commands[$0] }, replies: replies, askedNodes: askedNodes)
    }
}

// MARK: - Cluster routing

extension RedisConnection {
    /// Finds out what the server is, or reads a stale slot map again, before a call.
    /// - Parameter arguments: The one command about to be sent (nil for a pipeline): a `SCAN` reads
    ///   a stale map again even if it was read less than ``refreshInterval`` ago.
    private func prepare(for arguments: [[UInt8]]? = nil) throws(RedisError) -> Topology {
        switch self.topology {
        case .standalone:
            return .standalone
        case .cluster:
            if self.mapIsStale { self.refresh(evenIfRecent: arguments.map(RedisRoute.scansKeys) ?? false) }
            return .cluster
        case .unknown:
            self.lastServer = self.seed.server
            let reply = try self.seed.command([Array("CLUSTER".utf8), Array("SLOTS".utf8)])
            if case .error(let message) = reply {
                // A standalone Redis says "cluster support disabled". An unknown command or an ACL
                // refusal is taken as standalone too, until a redirect says otherwise; anything
                // else (LOADING, BUSY...) is an error, and the next call asks again.
                let disabled = message.contains("cluster support disabled")
                guard disabled || message.hasPrefix("NOPERM") || message.hasPrefix("ERR unknown command") else {
                    throw .errorReply(self.seed.server, command: "CLUSTER SLOTS", message)
                }
                self.slotsRefused = !disabled
                self.topology = .standalone
                return .standalone
            }
            guard let map = RedisClusterMap(slotsReply: reply, askedHost: self.seed.configuration.host) else {
                throw .unexpectedReply(self.seed.server, command: "CLUSTER SLOTS", reply)
            }
            guard map.assignedSlots > 0 else {
                throw .errorReply(self.seed.server, command: "CLUSTER SLOTS", "no slot is served by any node yet")
            }
            self.adopt(map, from: self.seed)
            self.topology = .cluster
            return .cluster
        }
    }

    private func becomeCluster(because reason: String) {
        self.logger.debug("Redis is a cluster: \(reason)")
        self.topology = .cluster
        self.mapIsStale = true
    }

    /// Sends `arguments` where its slot lives, following redirects and waiting out `TRYAGAIN`.
    private func clusterCommand(_ arguments: [[UInt8]]) throws(RedisError) -> RedisReply {
        var node = try self.node(for: arguments)
        var asking = false
        for attempt in 0...Self.maximumRedirects {
            let reply = try self.send(to: node) { node throws(RedisError) in
                asking ? try node.pipeline([[Array("ASKING".utf8)], arguments])[1] : try node.command(arguments)
            }
            if Self.isTryAgain(reply) {
                // The slot is migrating and the keys are split between two nodes for a moment.
                usleep(UInt32(20_000 * (attempt + 1)))
                continue
            }
            guard let redirect = RedisRedirect(reply, askedHost: node.configuration.host) else { return reply }
            self.redirectsFollowed += 1
            switch redirect.kind {
            case .moved:
                self.learn(redirect)
                asking = false
            case .ask:
                asking = true
            }
            node = self.node(at: redirect.address)
        }
        let name = String(decoding: arguments[0], as: UTF8.self).uppercased()
        throw .errorReply(
            node.server, command: name,
            "redirected or told to try again more than \(Self.maximumRedirects) times; the cluster's slots are moving, try again"
        )
    }

    /// Runs `body` on `node`, remembering it as the server that answered, and marking the map
    /// stale when the node fails (it may have failed over).
    private func send<T>(to node: RedisNode, _ body: (RedisNode) throws(RedisError) -> T) throws(RedisError) -> T {
        self.lastServer = node.server
        do {
            return try body(node)
        } catch {
            if self.topology == .cluster { self.mapIsStale = true }
            throw error
        }
    }

    /// The node to send `arguments` to: the master of its slot, or for a command without a key (or
    /// a slot no master serves, which that node will explain) the configured server, or while its
    /// connection is down, a master whose connection is open.
    private func node(for arguments: [[UInt8]]) throws(RedisError) -> RedisNode {
        guard let route = RedisRoute(arguments) else {
            let name = String(decoding: arguments[0], as: UTF8.self).uppercased()
            throw RedisError(
                code: .notRoutable,
                message: "cannot send \(name) to the Redis Cluster at \(self.configuration.server): it names no single hash slot "
                    + "(SCAN and KEYS need a literal {hash tag} in their pattern; MULTI and WATCH are not supported)"
            )
        }
        guard case .slot(let slot) = route, let address = self.map.master(of: slot) else {
            // No key (or no master known for it): the configured server, unless its connection
            // failed and a master's is open.
            guard !self.seed.isConnected else { return self.seed }
            return self.map.masters.lazy.compactMap { self.nodes[$0] }.first { $0.isConnected } ?? self.seed
        }
        return self.node(at: address)
    }

    private func node(at address: RedisClusterMap.Address) -> RedisNode {
        if let node = self.nodes[address] { return node }
        var configuration = self.configuration
        configuration.host = address.host
        configuration.port = address.port
        let node = RedisNode(configuration: configuration, logger: self.logger)
        self.nodes[address] = node
        return node
    }

    /// A `MOVED`: the slot lives elsewhere now, and probably others moved with it.
    private func learn(_ redirect: RedisRedirect) {
        self.logger.debug("Redis Cluster slot moved", metadata: ["slot": "\(redirect.slot)", "to": "\(redirect.address)"])
        self.map.assign(redirect.slot, to: redirect.address)
        self.mapIsStale = true
    }

    /// Reads the slot map again from the first node that answers (the known masters, then the
    /// configured server), at most once per ``refreshInterval`` unless `evenIfRecent`.
    /// A failure leaves the old map (and its staleness): commands still go where it says.
    private func refresh(evenIfRecent: Bool) {
        guard !self.slotsRefused else {
            self.mapIsStale = false  // nothing to read: MOVED keeps the map
            return
        }
        let now = ContinuousClock.now
        if !evenIfRecent, let lastRefresh = self.lastRefresh, now < lastRefresh + Self.refreshInterval { return }
        self.lastRefresh = now
        let masters = self.map.masters.map { self.node(at: $0) }
        for node in masters.filter(\.isConnected) + masters.filter({ !$0.isConnected }) + [self.seed] {
            guard let reply = try? node.command([Array("CLUSTER".utf8), Array("SLOTS".utf8)]),
                let map = RedisClusterMap(slotsReply: reply, askedHost: node.configuration.host), map.assignedSlots > 0
            else { continue }
            self.adopt(map, from: node)
            return
        }
        self.logger.warning("no Redis Cluster node answered CLUSTER SLOTS; keeping the old slot map")
    }

    /// Makes `map` the current one, and closes the connections of nodes that serve no slot in it.
    private func adopt(_ map: RedisClusterMap, from node: RedisNode) {
        self.map = map
        self.mapIsStale = false
        self.lastRefresh = ContinuousClock.now
        let masters = Set(map.masters)
        for (address, node) in self.nodes where !masters.contains(address) {
            node.close()
            self.nodes[address] = nil
        }
        self.logger.debug(
            "read the Redis Cluster slot map",
            metadata: ["from": "\(node.server)", "masters": "\(map.masters.map(\.description).joined(separator: ","))"]
        )
    }

    /// `replies` with each redirected command sent again where it belongs, in the order given
    /// (commands on one key keep their order); `askedNodes[i]` answered `replies[i]`.
    private func redirected(_ command: (Int) -> [[UInt8]], replies: [RedisReply], askedNodes: [RedisNode]) throws(RedisError) -> [RedisReply] {
        var replies = replies
        for index in replies.indices {
            if let redirect = RedisRedirect(replies[index], askedHost: askedNodes[index].configuration.host) {
                self.redirectsFollowed += 1
                if redirect.kind == .moved { self.learn(redirect) }
            } else if !Self.isTryAgain(replies[index]) {
                continue
            }
            replies[index] = try self.clusterCommand(command(index))
        }
        return replies
    }

    /// Whether `reply` is `TRYAGAIN`: a multi-key command whose keys a migrating slot has split.
    private static func isTryAgain(_ reply: RedisReply) -> Bool {
        if case .error(let message) = reply { message.hasPrefix("TRYAGAIN") } else { false }
    }
}

// A redisContext must be used from one thread at a time; RedisClient confines each connection.
@available(*, unavailable)
extension RedisConnection: Sendable {}
