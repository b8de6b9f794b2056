import APNSTransport
import APNSWire
import Crypto
import Foundation
import Synchronization
import PushFleetTestSupport
import Testing

/// The `.p8` signing key: clear errors naming the file, one token shared until renewal.
@Suite struct ProviderTokenSignerTests {
    @Test func aMissingKeyFileIsNamed() {
        let path = NSTemporaryDirectory() + "pushfleet-no-such-key-\(UInt32.random(in: 0...UInt32.max)).p8"
        let error = #expect(throws: TransportError.self) { try ProviderTokenSigner(keyPath: path, keyID: "KEY0000001", teamID: "TEAM000001") }
        #expect(error?.code == .unusableCredential)
        #expect(error?.message.contains(path) == true)
    }

    @Test func aFileThatIsNotAP256KeyIsNamed() throws {
        let certificates = try TestCertificates.shared()
        // A certificate, and the public half of the key: neither is a private key.
        for path in [certificates.clientCertificate, certificates.authKeyPublic] {
            let error = #expect(throws: TransportError.self) { try ProviderTokenSigner(keyPath: path, keyID: "KEY0000001", teamID: "TEAM000001") }
            #expect(error?.message.contains(path) == true)
            #expect(error?.message.contains("P-256") == true)
        }
    }

    @Test func oneTokenIsSharedUntilItIsDueAndVerifiesWithThePublicKey() throws {
        let certificates = try TestCertificates.shared()
        let clock = TestClock(seconds: 1_800_000_000)
        let signer = try ProviderTokenSigner(keyPath: certificates.authKey, keyID: "KEY0000001", teamID: "TEAM000001", now: { clock.seconds })
        let first = try signer.current()
        clock.seconds += 49 * 60
        #expect(try signer.current() == first)
        clock.seconds += 2 * 60
        let second = try signer.current()
        #expect(second != first)
        #expect(second.issuedAt == 1_800_000_000 + 51 * 60)
        #expect(signer.tokensSigned == 2)
        let publicKey = try P256.Signing.PublicKey(pemRepresentation: try String(contentsOfFile: certificates.authKeyPublic, encoding: .utf8))
        #expect(try ProviderToken(parsing: second.compact).isSignatureValid(for: publicKey))
        #expect(!"\(signer)".contains(second.compact))
    }
}

/// A settable clock in epoch seconds.
final class TestClock: Sendable {
    private let value: Atomic<Int64>
    init(seconds: Int64) { self.value = Atomic(seconds) }
    var seconds: Int64 {
        get { self.value.load(ordering: .relaxed) }
        set { self.value.store(newValue, ordering: .relaxed) }
    }
}
