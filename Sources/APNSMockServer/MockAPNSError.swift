/// Why the simulator could not start.
public struct MockAPNSError: Error, CustomStringConvertible {
    public let message: String
    public let file: String
    public let line: Int
    public var description: String { self.message }

    static func cannotBind(what: String, host: String, port: Int, underlying: any Error, file: String = #fileID, line: Int = #line) -> Self {
        Self(message: "cannot listen for the \(what) on \(host):\(port): \(underlying)", file: file, line: line)
    }

    static func unreadableTLSFile(what: String, path: String, underlying: any Error, file: String = #fileID, line: Int = #line) -> Self {
        Self(message: "cannot load the simulator's \(what) from \(path): \(underlying)", file: file, line: line)
    }

    static func unreadableKeyFile(path: String, underlying: any Error, file: String = #fileID, line: Int = #line) -> Self {
        Self(message: "cannot load a provider-token public key (PEM) from \(path): \(underlying)", file: file, line: line)
    }
}
