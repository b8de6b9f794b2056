public import NIOSSL

/// How a client proves who it is to APNs (or to the simulator), and whom it trusts.
public struct ClientTLS: Sendable {
    private enum Identity: Sendable {
        case pem(certificate: String, key: String)
        case pkcs12(path: String, password: [UInt8])
        case none
    }

    private let identity: Identity
    /// Extra PEM files of trust roots, added to the system's (`--ca`).
    public var additionalTrustRoots: [String]

    private init(identity: Identity, additionalTrustRoots: [String]) {
        self.identity = identity
        self.additionalTrustRoots = additionalTrustRoots
    }

    /// A client certificate and its private key, both PEM files.
    public static func certificate(pem certificate: String, key: String, trusting roots: [String] = []) -> Self {
        Self(identity: .pem(certificate: certificate, key: key), additionalTrustRoots: roots)
    }

    /// A PKCS#12 bundle holding the client certificate and key. The password comes from the caller
    /// (an environment variable in the CLI) and is never logged.
    public static func pkcs12(path: String, password: [UInt8], trusting roots: [String] = []) -> Self {
        Self(identity: .pkcs12(path: path, password: password), additionalTrustRoots: roots)
    }

    /// No client certificate (provider-token auth over HTTP/2).
    public static func noClientCertificate(trusting roots: [String] = []) -> Self {
        Self(identity: .none, additionalTrustRoots: roots)
    }

    /// Loads the files and builds the TLS configuration: TLS 1.2 or later, the peer verified
    /// against the system roots plus ``additionalTrustRoots``, hostname included.
    /// - Throws: ``TransportError`` naming the file that could not be used.
    public func makeConfiguration(applicationProtocols: [String] = []) throws -> TLSConfiguration {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.minimumTLSVersion = .tlsv12
        configuration.certificateVerification = .fullVerification
        configuration.applicationProtocols = applicationProtocols
        switch self.identity {
        case .pem(let certificatePath, let keyPath):
            do {
                configuration.certificateChain = try NIOSSLCertificate.fromPEMFile(certificatePath).map { .certificate($0) }
            } catch {
                throw TransportError.unusableCredential(what: "client certificate", path: certificatePath, underlying: error)
            }
            guard !configuration.certificateChain.isEmpty else {
                throw TransportError.unusableCredential(what: "client certificate", path: certificatePath, underlying: "no PEM certificate in the file")
            }
            do {
                configuration.privateKey = .privateKey(try NIOSSLPrivateKey(file: keyPath, format: .pem))
            } catch {
                throw TransportError.unusableCredential(what: "client private key", path: keyPath, underlying: error)
            }
        case .pkcs12(let path, let password):
            do {
                let bundle = try NIOSSLPKCS12Bundle(file: path, passphrase: password)
                configuration.certificateChain = bundle.certificateChain.map { .certificate($0) }
                configuration.privateKey = .privateKey(bundle.privateKey)
            } catch {
                throw TransportError.unusableCredential(what: "PKCS#12 bundle (wrong password?)", path: path, underlying: error)
            }
        case .none:
            break
        }
        if !self.additionalTrustRoots.isEmpty {
            var roots: [NIOSSLCertificate] = []
            for path in self.additionalTrustRoots {
                do {
                    roots += try NIOSSLCertificate.fromPEMFile(path)
                } catch {
                    throw TransportError.unusableCredential(what: "CA certificate", path: path, underlying: error)
                }
            }
            configuration.additionalTrustRoots = [.certificates(roots)]
        }
        return configuration
    }
}
