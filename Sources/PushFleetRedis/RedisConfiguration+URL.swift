extension RedisConfiguration {
    /// Parses `redis://[:password@]host[:port][/db]`.
    ///
    /// The password may be percent-encoded (`%40` for `@`). The port defaults to 6379 and the database
    /// to 0; an IPv6 address goes in brackets (`redis://[::1]:6379`). Timeouts take their defaults.
    /// - Throws: ``RedisError`` with code ``RedisError/Code/invalidURL``, naming the problem; the
    ///   URL it quotes has its password masked.
    public init(url: String) throws(RedisError) {
        let scheme = "redis://"
        let redacted = Self.redacted(url)
        guard url.hasPrefix(scheme) else {
            throw .invalidURL(redacted, "the scheme must be redis:// (TLS, rediss://, is not supported by hiredis 0.14)")
        }
        var rest = Substring(url.dropFirst(scheme.count))
        // The password goes first: it may contain any character, so nothing after this may quote it.
        var password: String? = nil
        if let at = rest.lastIndex(of: "@") {
            let userInfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            guard userInfo.first == ":" else {
                throw .invalidURL(redacted, "user names are not supported; write the password as redis://:password@host")
            }
            guard let decoded = Self.percentDecoded(userInfo.dropFirst()), !decoded.isEmpty else {
                throw .invalidURL(redacted, "the password is empty or badly percent-encoded")
            }
            password = decoded
        }

        if rest.contains("?") || rest.contains("#") { throw .invalidURL(redacted, "query strings and fragments are not supported") }
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let path = rest[rest.index(after: slash)...]
            rest = rest[..<slash]
            if !path.isEmpty {
                guard let number = Int(path), number >= 0 else {
                    throw .invalidURL(redacted, "the database '\(path)' is not a non-negative integer")
                }
                database = number
            }
        }

        let host: Substring
        var portText: Substring? = nil
        if rest.first == "[" {
            guard let close = rest.firstIndex(of: "]") else { throw .invalidURL(redacted, "an IPv6 address lacks its ']'") }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.first == ":" else { throw .invalidURL(redacted, "unexpected '\(after)' after the host") }
                portText = after.dropFirst()
            }
        } else if let colon = rest.firstIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            host = rest
        }
        guard !host.isEmpty, !host.contains(where: { $0 == " " || $0 == "@" || $0 == "[" || $0 == "]" }) else {
            throw .invalidURL(redacted, "the host is missing or malformed")
        }
        var port = Self.defaultPort
        if let portText {
            guard let number = Int(portText), (1...65535).contains(number) else {
                throw .invalidURL(redacted, "the port '\(portText)' is not a number from 1 to 65535")
            }
            port = number
        }
        self.init(host: String(host), port: port, password: password, database: database)
    }

    /// The URL with anything between `redis://` and the last `@` replaced by `:***`.
    static func redacted(_ url: String) -> String {
        guard let at = url.lastIndex(of: "@") else { return url }
        let scheme = "redis://"
        let prefix = url.hasPrefix(scheme) ? scheme : ""
        return prefix + ":***" + String(url[at...])
    }

    private static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(Self.hexValue), let low = iterator.next().flatMap(Self.hexValue) else {
                return nil
            }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
