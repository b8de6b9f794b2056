import APNSMockServer
import ArgumentParser
import Foundation
import Logging
import NIOCore
import NIOPosix
import PushFleetCore

/// Runs the APNs simulator until interrupted.
struct MockAPNs: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mock-apns",
        abstract: "Run the APNs simulator: binary gateway, feedback service, and a ledger on an admin port.",
        discussion: """
            The gateway requires a client certificate signed by --client-ca, answers the first bad \
            notification of a connection with an error response after --error-delay-ms and closes, \
            and discards whatever followed. GET /stats on the admin port returns the ledger as JSON; \
            POST /reset clears it. --certs DIR uses server.pem, server-key.pem and ca.pem from DIR \
            (as made by scripts/make-test-certs.sh).
            """
    )

    @Option(help: "Address to listen on.")
    var host: String = "127.0.0.1"

    @Option(help: "Binary gateway port (0 picks a free one).")
    var binaryPort: Int = 2195

    @Option(help: "Feedback service port (0 picks a free one).")
    var feedbackPort: Int = 2196

    @Option(help: "Admin HTTP port for /stats and /reset (0 picks a free one).")
    var adminPort: Int = 8195

    @Option(help: "Directory with server.pem, server-key.pem and ca.pem.")
    var certs: String?

    @Option(help: "Server certificate chain (PEM).")
    var cert: String?

    @Option(help: "Server private key (PEM).")
    var key: String?

    @Option(help: "CA (PEM) that client certificates must chain to.")
    var clientCa: String?

    @Option(help: "File of tokens answered with InvalidToken (8).")
    var invalidTokens: String?

    @Option(help: "File of tokens accepted, then reported by the feedback service.")
    var unregisteredTokens: String?

    @Option(help: "Milliseconds before an error response is written.")
    var errorDelayMs: Int = 500

    @Option(help: "Every N accepted notifications, close that connection without a word.")
    var dropEvery: Int?

    @Option(help: "Every N accepted notifications, answer status 10 (Shutdown) and close.")
    var shutdownEvery: Int?

    @Option(help: "Accept at most N notifications per second on each connection.")
    var ratePerConnection: Int?

    func validate() throws {
        if self.certs == nil && (self.cert == nil || self.key == nil || self.clientCa == nil) {
            throw ValidationError("Give --certs DIR, or all of --cert, --key and --client-ca.")
        }
        guard self.errorDelayMs >= 0 else { throw ValidationError("--error-delay-ms must not be negative") }
    }

    func run() async throws {
        let configuration = try self.makeConfiguration()
        let server = MockAPNSServer(configuration: configuration, group: MultiThreadedEventLoopGroup.singleton)
        let ports = try await server.start()
        // Unbuffered: scripts read this line to learn the ports while the simulator runs.
        FileHandle.standardOutput.write(Data("mock-apns binary=\(ports.binary ?? 0) feedback=\(ports.feedback ?? 0) admin=\(ports.admin ?? 0)\n".utf8))
        try await Signals.waitForTermination()
        try await server.shutdown()
    }

    func makeConfiguration() throws -> MockAPNSConfiguration {
        let tls = MockAPNSConfiguration.TLSFiles(
            certificateChain: self.cert ?? "\(self.certs!)/server.pem",
            privateKey: self.key ?? "\(self.certs!)/server-key.pem",
            clientCA: self.clientCa ?? "\(self.certs!)/ca.pem"
        )
        return MockAPNSConfiguration(
            host: self.host,
            binaryPort: self.binaryPort,
            feedbackPort: self.feedbackPort,
            adminPort: self.adminPort,
            tls: tls,
            invalidTokens: Set(try self.invalidTokens.map { try TokenFileReader(path: $0).readAll() } ?? []),
            unregisteredTokens: Set(try self.unregisteredTokens.map { try TokenFileReader(path: $0).readAll() } ?? []),
            errorDelay: .milliseconds(Int64(self.errorDelayMs)),
            binaryFaults: .init(dropEvery: self.dropEvery, shutdownEvery: self.shutdownEvery, ratePerConnection: self.ratePerConnection)
        )
    }
}
