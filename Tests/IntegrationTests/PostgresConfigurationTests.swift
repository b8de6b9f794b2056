import PushFleetPostgres
import Testing

/// `PostgresConfiguration(url:)`: what it accepts, and the errors for what it does not.
@Suite struct PostgresConfigurationTests {
    @Test func parsesEveryPart() throws {
        let configuration = try PostgresConfiguration(url: "postgres://pf:s3cr%40t@db.example.com:6432/pushfleet?sslmode=require")
        #expect(configuration.username == "pf")
        #expect(configuration.host == "db.example.com")
        #expect(configuration.port == 6432)
        #expect(configuration.database == "pushfleet")
        #expect(configuration.tls == .require)
        #expect(configuration.endpoint == "db.example.com:6432")
        #expect(configuration.description == "postgres://pf:***@db.example.com:6432/pushfleet?sslmode=require")
        #expect(!"\(configuration)".contains("s3cr"))
    }

    @Test func defaultsAndVariants() throws {
        let plain = try PostgresConfiguration(url: "postgresql://postgres@127.0.0.1/pushfleet")
        #expect(plain.port == 5432)
        #expect(plain.tls == .prefer)
        #expect(plain.description == "postgres://postgres@127.0.0.1:5432/pushfleet")
        let v6 = try PostgresConfiguration(url: "postgres://u@[::1]:5433/db?sslmode=disable")
        #expect(v6.host == "::1")
        #expect(v6.port == 5433)
        #expect(v6.endpoint == "[::1]:5433")
        #expect(v6.tls == .disable)
        #expect(plain.connectTimeout == .seconds(10))
        let patient = try PostgresConfiguration(url: "postgres://u@host/db?connect_timeout=60&sslmode=disable")
        #expect(patient.connectTimeout == .seconds(60))
        #expect(patient.tls == .disable)
        #expect(patient.description == "postgres://u@host:5432/db?sslmode=disable&connect_timeout=60")
        #expect(try PostgresConfiguration(url: "postgres://u@host/db?connect_timeout=5").description == "postgres://u@host:5432/db?connect_timeout=5")
    }

    @Test(arguments: [
        ("redis://u@host:5432/db", "scheme"),
        ("127.0.0.1:5432", "scheme"),
        ("postgres://host:5432/db", "no user"),
        ("postgres://:pw@host:5432/db", "no user"),
        ("postgres://u@:5432/db", "no host"),
        ("postgres://u@host:99999/db", "port '99999'"),
        ("postgres://u@host:abc/db", "port 'abc'"),
        ("postgres://u@host:5432", "no database"),
        ("postgres://u@host:5432/", "database"),
        ("postgres://u@[::1/db", "unclosed"),
        ("postgres://u@host/db?sslmode=verify-full", "sslmode 'verify-full'"),
        ("postgres://u@host/db?application_name=x", "application_name"),
        ("postgres://u@host/db?connect_timeout=0", "connect_timeout '0'"),
        ("postgres://u@host/db?connect_timeout=2.5", "connect_timeout '2.5'"),
        ("postgres://u@host/db?sslmode", "'sslmode' has no value"),
    ])
    func rejectsMalformedURLs(url: String, mentioning: String) {
        #expect {
            _ = try PostgresConfiguration(url: url)
        } throws: { error in
            guard let error = error as? PostgresStoreError else { return false }
            return error.code == .invalidURL && error.message.contains(mentioning)
        }
    }

    @Test func errorsNeverShowThePassword() {
        #expect {
            _ = try PostgresConfiguration(url: "postgres://u:hunter2@host:notaport/db")
        } throws: { error in
            let text = "\(error)"
            return text.contains("notaport") && !text.contains("hunter2")
        }
    }
}
