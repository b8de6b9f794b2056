import Foundation

/// The throwaway PKI the tests and the demo use: a CA, a server certificate for localhost and
/// 127.0.0.1, a client certificate (PEM and PKCS#12), and a client certificate from another CA.
///
/// Made by `scripts/make-test-certs.sh`; `scripts/test.sh` makes them once and exports
/// `PUSHFLEET_TEST_CERTS`. Without that variable (a bare `swift test`), they are made on first use
/// in a temporary directory. No private key is ever checked in.
public struct TestCertificates: Sendable {
    public let directory: String

    public var caCertificate: String { self.path("ca.pem") }
    public var serverCertificate: String { self.path("server.pem") }
    public var serverKey: String { self.path("server-key.pem") }
    public var clientCertificate: String { self.path("client.pem") }
    public var clientKey: String { self.path("client-key.pem") }
    public var clientPKCS12: String { self.path("client.p12") }
    public var rogueClientCertificate: String { self.path("rogue-client.pem") }
    public var rogueClientKey: String { self.path("rogue-client-key.pem") }
    /// Provider-token signing key (PKCS#8 PEM, like Apple's `.p8`) and its public key.
    public var authKey: String { self.path("auth-key.p8") }
    public var authKeyPublic: String { self.path("auth-key-public.pem") }
    /// A second signing key the simulator is not told about unless a test says so.
    public var otherAuthKey: String { self.path("other-auth-key.p8") }
    public var otherAuthKeyPublic: String { self.path("other-auth-key-public.pem") }

    /// The password of ``clientPKCS12``.
    public var clientPKCS12Password: String {
        get throws {
            try String(contentsOfFile: self.path("client.p12.password"), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    private func path(_ name: String) -> String { "\(self.directory)/\(name)" }

    /// The certificates of this test run, made on first use.
    public static func shared() throws -> TestCertificates {
        try sharedResult.get()
    }

    private static let sharedResult: Result<TestCertificates, any Error> = Result {
        if let directory = ProcessInfo.processInfo.environment["PUSHFLEET_TEST_CERTS"], !directory.isEmpty {
            return TestCertificates(directory: directory)
        }
        let directory = NSTemporaryDirectory() + "pushfleet-test-certs-\(getpid())"
        let script = repositoryRoot() + "/scripts/make-test-certs.sh"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [script, directory]
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw TestSupportError("\(script) \(directory) exited with status \(process.terminationStatus)")
        }
        return TestCertificates(directory: directory)
    }

    /// The package's root directory, found from this source file's path.
    public static func repositoryRoot(file: String = #filePath) -> String {
        var url = URL(fileURLWithPath: file)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url.path }
        }
        return FileManager.default.currentDirectoryPath
    }
}

/// A failure of the test fixtures themselves.
public struct TestSupportError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
