import APNSTransport
import ArgumentParser
import Foundation

/// How a command authenticates to APNs with a certificate, and whom it trusts.
struct TLSOptions: ParsableArguments {
    @Option(help: "Client certificate (PEM).")
    var cert: String?

    @Option(help: "Private key of --cert (PEM).")
    var key: String?

    @Option(help: "Client certificate and key as a PKCS#12 bundle.")
    var p12: String?

    @Option(help: "Environment variable holding the --p12 password (or, as NAME_FILE, the path of a file holding it).")
    var p12PasswordEnv: String = "PUSHFLEET_P12_PASSWORD"

    @Option(help: "Extra trust roots (PEM), e.g. the CA of mock-apns.")
    var ca: [String] = []

    func validate() throws {
        if self.p12 != nil && (self.cert != nil || self.key != nil) {
            throw ValidationError("Use either --p12 or --cert with --key, not both.")
        }
        if (self.cert == nil) != (self.key == nil) {
            throw ValidationError("--cert and --key go together.")
        }
    }

    var hasIdentity: Bool { self.p12 != nil || self.cert != nil }

    /// The client TLS identity. The PKCS#12 password is read from the environment, never logged.
    func clientTLS() throws -> ClientTLS {
        if let p12 = self.p12 {
            let environment = ProcessInfo.processInfo.environment
            let password: String
            if let value = environment[self.p12PasswordEnv] {
                password = value
            } else if let file = environment[self.p12PasswordEnv + "_FILE"] {
                guard var text = try? String(contentsOfFile: file, encoding: .utf8) else {
                    throw CLIError("the password of \(p12) is read from $\(self.p12PasswordEnv)_FILE=\(file), which cannot be read")
                }
                while text.last?.isNewline == true { text.removeLast() }
                password = text
            } else {
                throw CLIError("the password of \(p12) is read from $\(self.p12PasswordEnv) or the file $\(self.p12PasswordEnv)_FILE names; neither is set")
            }
            return .pkcs12(path: p12, password: Array(password.utf8), trusting: self.ca)
        }
        if let cert = self.cert, let key = self.key {
            return .certificate(pem: cert, key: key, trusting: self.ca)
        }
        throw CLIError("a client certificate is needed: --cert and --key, or --p12")
    }
}
