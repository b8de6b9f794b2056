import Foundation
import PushFleetTestSupport
import Testing

/// `deploy/` checked without a container engine by `scripts/check-deploy.py`: the Kubernetes
/// manifests against the Kubernetes schemas (kubernetes-validate, which `scripts/test.sh` installs
/// and names in `PUSHFLEET_DEPLOY_PYTHON`), the KEDA objects' fields, `compose.yaml`, every option
/// and `PUSHFLEET_*` variable given to pushfleet against the CLI itself, and (given
/// `PUSHFLEET_STATIC_BINARY`, as `scripts/test.sh` does) the image's runtime stage: the binary
/// links no Swift library, every library it needs is in the runtime packages, and it runs.
@Suite struct DeployManifestTests {
    private func check(_ directory: String? = nil) throws -> (status: Int32, output: String) {
        let python = try #require(
            ProcessInfo.processInfo.environment["PUSHFLEET_DEPLOY_PYTHON"], "PUSHFLEET_DEPLOY_PYTHON is not set: run the tests through scripts/test.sh"
        )
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [TestCertificates.repositoryRoot() + "/scripts/check-deploy.py", PushFleetProcess.executable]
        var environment = ProcessInfo.processInfo.environment
        // scripts/test.sh builds the statically linked binary the image ships: check it too.
        if let image = environment["PUSHFLEET_STATIC_BINARY"] { process.arguments! += ["--image", image] }
        if let directory { environment["PUSHFLEET_DEPLOY_DIR"] = directory }
        process.environment = environment
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, output)
    }

    @Test func theManifestsAreValid() throws {
        let (status, output) = try self.check()
        #expect(status == 0, "\(output)")
    }

    /// The check is not blind: a misspelt Kubernetes field, a variable that names no option, and a
    /// KEDA object that would not scale to zero are each found and named.
    @Test func aBrokenCopyIsRefused() throws {
        let copy = NSTemporaryDirectory() + "pushfleet-deploy-\(UUID().uuidString)/deploy"
        try FileManager.default.createDirectory(atPath: (copy as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: TestCertificates.repositoryRoot() + "/deploy", toPath: copy)
        defer { try? FileManager.default.removeItem(atPath: (copy as NSString).deletingLastPathComponent) }
        func edit(_ file: String, _ from: String, _ to: String) throws {
            let path = copy + "/" + file
            let text = try String(contentsOfFile: path, encoding: .utf8)
            try #require(text.contains(from), "\(file) no longer holds \(from)")
            try text.replacingOccurrences(of: from, with: to).write(toFile: path, atomically: true, encoding: .utf8)
        }
        try edit("kubernetes/worker.yaml", "terminationGracePeriodSeconds: 60", "terminationGracePeriodSecond: 60")
        try edit("kubernetes/configmap.yaml", "PUSHFLEET_TEAM_ID:", "PUSHFLEET_TEAM_IDD:")
        try edit("kubernetes/keda-scaledobject.yaml", "minReplicaCount: 0", "minReplicaCount: 1")
        try edit("kubernetes/coordinator.yaml", "        fsGroup: 10001\n", "")
        let (status, output) = try self.check(copy)
        #expect(status == 1)
        #expect(output.contains("deploy/kubernetes/worker.yaml: Deployment pushfleet-worker: Additional properties are not allowed"), "\(output)")
        #expect(output.contains("PUSHFLEET_TEAM_IDD names no option of `pushfleet worker`"), "\(output)")
        #expect(output.contains("minReplicaCount: 0"), "\(output)")
        #expect(output.contains("pushfleet-coordinator: runs as user 10001 with secret volumes but no fsGroup"), "\(output)")
    }
}
