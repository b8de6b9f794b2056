import NIOCore
import NIOPosix
import NIOSSL
import PushFleetCore

/// Why a sender's connections to its gateway keep failing, as the refusal of every notification
/// waiting for one. Both senders give it once connections failed `maximumAttempts` times in a row
/// without an answer and none works, so that a campaign pauses with the reason instead of staying
/// `running` with nothing sent:
/// - TLS failed (``RejectionReason/tlsFailure``). About a certificate (a client certificate
///   expired, revoked or issued by a CA the gateway does not trust; a server certificate the trust
///   roots do not cover, or for another name), or no HTTP/2 on the port: only an operator can put
///   that right, so it is no outage and the campaign waits for `campaign resume`. Any other TLS
///   error (an overloaded terminator's `internal_error`, a record garbled on the way) is taken for
///   an outage.
/// - The gateway could not be reached (``RejectionReason/cannotConnect``: refused, timed out, closed
///   during the handshake), or its connections ended without an answer, closed by it or given up
///   (``RejectionReason/connectionLost``): an outage, which the coordinator resumes by itself.
enum GatewayFailure {
    /// - Parameters:
    ///   - error: the last connection's error, if it had one.
    ///   - connected: the last connection completed its TLS handshake before it ended.
    static func refusal(_ error: (any Error)?, host: String, port: Int, connected: Bool) -> ProviderRefusal {
        let gateway = "\(host):\(port)"
        if let tls = error.flatMap(Self.tlsProblem) {
            let detail = tls.reason.contains("_ALERT_") ? "\(gateway) sent TLS alert \(tls.reason)" : "TLS with \(gateway) failed: \(tls.reason)"
            return ProviderRefusal(reason: .tlsFailure, status: 0, isOutage: !tls.isConfiguration, detail: detail)
        }
        guard connected else {
            let cause = error.map { ": \(Self.connectCause($0))" } ?? ""
            return ProviderRefusal(reason: .cannotConnect, status: 0, isOutage: true, detail: "cannot connect to \(gateway)\(cause)")
        }
        let cause = error.map { " (\($0))" } ?? ""
        return ProviderRefusal(reason: .connectionLost, status: 0, isOutage: true, detail: "no answer from \(gateway) on any connection\(cause)")
    }

    /// What went wrong in TLS, if `error` is a TLS failure rather than the network's.
    struct TLSProblem: Equatable {
        /// BoringSSL's reason (`TLSV1_ALERT_UNKNOWN_CA`, `CERTIFICATE_VERIFY_FAILED`), or the
        /// failure's description.
        var reason: String
        /// Only a change of configuration (a certificate, the trust roots, the endpoint) cures it.
        var isConfiguration: Bool
    }

    static func tlsProblem(_ error: any Error) -> TLSProblem? {
        switch error {
        case let error as NIOSSLError:
            switch error {
            case .handshakeFailed(let failure):
                return Self.tlsProblem(failure)
            case .failedToLoadCertificate, .failedToLoadPrivateKey, .noSuchFilesystemObject, .cannotMatchULabel:
                return TLSProblem(reason: "\(error)", isConfiguration: true)
            default:
                return nil  // the connection's end (an unclean shutdown, a failed close), not TLS refusing it
            }
        case let error as BoringSSLError:
            switch error {
            case .sslError(let stack), .unknownError(let stack), .invalidSNIName(let stack), .failedToSetALPN(let stack):
                // NIOSSL's own entries (EOF during the handshake) are the connection ending.
                return stack.lazy.compactMap(Self.reason).first.map { TLSProblem(reason: $0, isConfiguration: Self.isAboutCertificates($0)) }
            default:
                return nil
            }
        case let error as NIOSSLExtraError:
            return TLSProblem(reason: "\(error)", isConfiguration: true)  // a server certificate for another name
        case let error as NotHTTP2:
            return TLSProblem(reason: error.description, isConfiguration: true)
        default:
            return nil
        }
    }

    /// Whether BoringSSL's `reason` is a certificate refused, by either side: the alerts
    /// `bad_certificate`, `unsupported_certificate`, `certificate_revoked`, `certificate_expired`,
    /// `certificate_unknown`, `unknown_ca`, `access_denied`, `certificate_required`, or this side's
    /// `CERTIFICATE_VERIFY_FAILED`.
    static func isAboutCertificates(_ reason: String) -> Bool {
        reason.contains("CERTIFICATE") || reason.contains("UNKNOWN_CA") || reason.contains("ACCESS_DENIED")
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
