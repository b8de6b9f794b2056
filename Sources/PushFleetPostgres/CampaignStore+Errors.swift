import PostgresNIO

extension CampaignStore {
    /// Turns whatever postgres-nio threw into a ``PostgresStoreError`` that names the server by
    /// `host:port` and says what went wrong, without the password (which postgres-nio never reports).
    func storeError(_ error: any Error, _ operation: String, connecting: Bool = false) -> any Error {
        let endpoint = self.configuration.endpoint
        switch error {
        case let error as PostgresStoreError:
            return error
        case is CancellationError:
            return error
        case let error as PSQLError:
            if error.code == .server, let info = error.serverInfo {
                let state = info[.sqlState] ?? "?"
                var reason = "\(info[.message] ?? "server error") (SQLSTATE \(state))"
                if let detail = info[.detail] { reason += "; \(detail)" }
                // Class 08 (connection), 28 (authorization), 3D000 (no such database), 57P (shutdown).
                if connecting || state.hasPrefix("08") || state.hasPrefix("28") || state == "3D000" || state.hasPrefix("57P") {
                    return PostgresStoreError.connectionFailed(endpoint, reason)
                }
                return PostgresStoreError.queryFailed(endpoint, operation, reason)
            }
            return PostgresStoreError.connectionFailed(endpoint, Self.reason(error))
        case let error as PostgresDecodingError:
            return PostgresStoreError.queryFailed(
                endpoint, operation, "cannot read column \(error.columnName) (\(error.postgresType)) as \(error.targetType)"
            )
        default:
            // The pool's own errors (for example its circuit breaker after repeated connect failures) come
            // from a module this target cannot import; anything else (a caller's error thrown from the
            // leader's body) passes through unchanged.
            if connecting || String(reflecting: type(of: error)).hasSuffix(".ConnectionPoolError") {
                return PostgresStoreError.connectionFailed(endpoint, String(describing: error))
            }
            return error
        }
    }

    private static func reason(_ error: PSQLError) -> String {
        switch error.underlying {
        case let failure as NIOConnectionError:
            if let first = failure.connectionErrors.first { return "\(first.error)" }
            if let dns = failure.dnsAError ?? failure.dnsAAAAError { return "cannot resolve the host: \(dns)" }
            return "connection failed"
        case let underlying?:
            return "\(underlying)"
        case nil:
            switch error.code {
            case .serverClosedConnection: return "the server closed the connection"
            case .sslUnsupported: return "the server does not support TLS (sslmode=require)"
            case .authMechanismRequiresPassword: return "the server requires a password and the URL has none"
            case .connectionError: return "connection failed"
            default: return "\(error.code)"
            }
        }
    }
}
