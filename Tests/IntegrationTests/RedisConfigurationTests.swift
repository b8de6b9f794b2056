import PushFleetRedis
import Testing

/// `redis://` URLs: what parses, and the errors for what does not (no server needed).
@Suite struct RedisConfigurationTests {
    @Test(arguments: [
        ("redis://127.0.0.1:6380", "127.0.0.1", 6380, nil, 0),
        ("redis://localhost", "localhost", 6379, nil, 0),
        ("redis://redis.internal:7000/4", "redis.internal", 7000, nil, 4),
        ("redis://:s3cret@10.0.0.5:6379/", "10.0.0.5", 6379, "s3cret", 0),
        ("redis://:p%40ss%2Fw@host:1/15", "host", 1, "p@ss/w", 15),
        ("redis://:a@b@host:2", "host", 2, "a@b", 0),
        ("redis://[::1]:6390/2", "::1", 6390, nil, 2),
    ] as [(String, String, Int, String?, Int)])
    func parses(_ url: String, host: String, port: Int, password: String?, database: Int) throws {
        let configuration = try RedisConfiguration(url: url)
        #expect(configuration.host == host)
        #expect(configuration.port == port)
        #expect(configuration.password == password)
        #expect(configuration.database == database)
        #expect(configuration.connectTimeout == .seconds(5))
        #expect(configuration.commandTimeout == .seconds(5))
    }

    @Test(arguments: [
        ("http://127.0.0.1:6379", "scheme"),
        ("rediss://127.0.0.1:6379", "scheme"),
        ("127.0.0.1:6379", "scheme"),
        ("redis://", "host"),
        ("redis://:6379", "host"),
        ("redis://host:0", "port"),
        ("redis://host:65536", "port"),
        ("redis://host:abc", "port"),
        ("redis://host:6379/x", "database"),
        ("redis://host:6379/-1", "database"),
        ("redis://host:6379?db=1", "query"),
        ("redis://user:topsecret@host:6379", "user names"),
        ("redis://:@host:6379", "password"),
        ("redis://:bad%zzsecret@host", "password"),
        ("redis://[::1:6379", "IPv6"),
    ])
    func rejects(_ url: String, mentioning problem: String) {
        let error = #expect(throws: RedisError.self) { try RedisConfiguration(url: url) }
        #expect(error?.code == .invalidURL)
        #expect(error?.message.contains(problem) == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("secret") == false, "the password leaked: \(error?.message ?? "")")
    }

    @Test func descriptionMasksThePassword() throws {
        let configuration = try RedisConfiguration(url: "redis://:hunter2@127.0.0.1:6379/1")
        #expect("\(configuration)" == "redis://:***@127.0.0.1:6379/1")
        #expect(RedisConfiguration(host: "::1").server == "[::1]:6379")
    }
}
