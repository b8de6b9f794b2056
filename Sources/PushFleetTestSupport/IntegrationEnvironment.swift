import Foundation

/// The servers `scripts/test.sh` starts for the integration tests, by the URLs it exports.
/// A test that needs one fails with a clear message when run outside that script.
public enum IntegrationEnvironment {
    /// `PUSHFLEET_REDIS_URL`, e.g. `redis://127.0.0.1:6380`.
    public static func redisURL() throws -> String { try self.variable("PUSHFLEET_REDIS_URL") }
    /// `PUSHFLEET_REDIS_CLUSTER_URL`: any node of a Redis Cluster of three masters, e.g. `redis://127.0.0.1:7000`.
    public static func redisClusterURL() throws -> String { try self.variable("PUSHFLEET_REDIS_CLUSTER_URL") }

    /// `PUSHFLEET_POSTGRES_URL`, e.g. `postgres://postgres@127.0.0.1:5433/pushfleet`.
    public static func postgresURL() throws -> String { try self.variable("PUSHFLEET_POSTGRES_URL") }

    /// The same server as ``postgresURL()``, database `pushfleet_pipeline` (made by `scripts/test.sh`):
    /// tests that run coordinators use it, since a coordinator serves every campaign of its database.
    public static func pipelinePostgresURL() throws -> String {
        let url = try self.postgresURL()
        guard let scheme = url.range(of: "://") else { return url }
        let rest = url[scheme.upperBound...]
        guard let slash = rest.firstIndex(of: "/") else { return url + "/pushfleet_pipeline" }
        let query = rest[slash...].firstIndex(of: "?").map { String(rest[$0...]) } ?? ""
        return String(url[..<slash]) + "/pushfleet_pipeline" + query
    }

    private static func variable(_ name: String) throws -> String {
        guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else {
            throw TestSupportError("\(name) is not set: run the integration tests through scripts/test.sh, which starts Redis and Postgres")
        }
        return value
    }
}
