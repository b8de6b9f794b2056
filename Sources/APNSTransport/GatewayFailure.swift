import NIOCore
import NIOPosix
import NIOSSL
import PushFleetCore

/// Why a sender's connections to its gateway keep failing, as the refusal of every notification
/// waiting for one. Both senders give it once `maximumAttempts` connections in a row failed without
/// an answer and none works, so that a campaign pauses with the reason instead of staying `running`
/// with nothing sent:
/// - TLS failed (``RejectionReason/tlsFailure``): a certificate refused by either side (a client
///   certificate expired, revoked or issued by a CA the gateway does not trust; a server
///   certificate the trust roots do not cover, or for another name), or no TLS, or no HTTP/2, on
///   that port. Only an operator can put that right, so it is not an outage: the campaign waits
///   for `campaign resume`.
/// - The gateway could not be reached (``RejectionReason/cannotConnect``: refused, timed out, closed
///   during the handshake), or its connections ended without an answer, closed by it or given up
///   (``RejectionReason/connectionLost``): an outage, which the coordinator resumes by itself.
enum GatewayFailure {
    /// - Parameters:
    ///   - error: the last connection's error, if it had one.
    ///   - connected: the last connection completed its TLS handshake before it ended.
    ///   - attempts: the connections that failed in a row.
    static func refusal(_ error: (any Error)?, host: String, port: Int, connected: Bool, attempts: Int) -> ProviderRefusal {
        let gateway = "\(host):\(port)"
        if let tls = error.flatMap(Self.tlsProblem) {
            let detail = tls.contains("_ALERT_") ? "\(gateway) sent TLS alert \(tls)" : "TLS with \(gateway) failed: \(tls)"
            return ProviderRefusal(reason: .tlsFailure, status: 0, isOutage: false, detail: detail)
        }
        guard connected else {
            let cause = error.map { ": \(Self.connectCause($0))" } ?? ""
            return ProviderRefusal(reason: .cannotConnect, status: 0, isOutage: true, detail: "cannot connect to \(gateway)\(cause)")
        }
        let cause = error.map { " (\($0))" } ?? ""
        return ProviderRefusal(
            reason: .connectionLost, status: 0, isOutage: true, detail: "no answer on \(attempts) connections in a row to \(gateway)\(cause)"
        )
    }

    /// What went wrong in TLS, if `error` is a TLS failure rather than the network's: BoringSSL's
    /// reason (`TLSV1_ALERT_UNKNOWN_CA`, `CERTIFICATE_VERIFY_FAILED`), or the failure's description.
    static func tlsProblem(_ error: any Error) -> String? {
        switch error {
        case let error as NIOSSLError:
            switch error {
            case .handshakeFailed(let failure):
                return Self.tlsProblem(failure)
            case .uncleanShutdown, .readInInvalidTLSState, .writeDuringTLSShutdown:
                return nil  // the connection's end, not TLS refusing it
            default:
                return "\(error)"
            }
        case let error as BoringSSLError:
            switch error {
            case .sslError(let stack), .unknownError(let stack), .invalidSNIName(let stack), .failedToSetALPN(let stack):
                // NIOSSL's own entries (EOF during the handshake) are the connection ending.
                return stack.lazy.compactMap(Self.reason).first
            default:
                return nil
            }
        case let error as NIOSSLExtraError:
            return "\(error)"
        case let error as NotHTTP2:
            return error.description
        default:
            return nil
        }
    }

    /// BoringSSL's reason name from `error`'s description (`Error: 268436504
    /// error:10000418:SSL routines:OPENSSL_internal:TLSV1_ALERT_UNKNOWN_CA at FILE:LINE`), without
    /// the source location; nil for an entry of NIOSSL's own (`EOF during handshake`).
    private static func reason(_ error: BoringSSLInternalError) -> String? {
        let description = error.description
        guard let start = description.firstRange(of: "OPENSSL_internal:")?.upperBound else { return nil }
        let rest = description[start...]
        return String(rest[..<(rest.firstRange(of: " at ")?.lowerBound ?? rest.endIndex)])
    }

    /// The cause of a failed connect, without NIO's list of every address tried.
    private static func connectCause(_ error: any Error) -> String {
        if let error = error as? NIOConnectionError, let first = error.connectionErrors.first { return "\(first.error)" }
        return "\(error)"
    }
}
