#if canImport(Glibc)
import Glibc
#endif

/// A TCP port of 127.0.0.1 that was free a moment ago: for a child process that must be told its
/// port before it starts. Another process may take it in between; on loopback in a test run that
/// is rare, and the child then fails to start with an error naming the port.
public enum FreePort {
    public static func take() throws -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw FreePortError(errno: errno) }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) } }
        guard bound == 0 else { throw FreePortError(errno: errno) }
        let named = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) } }
        guard named == 0 else { throw FreePortError(errno: errno) }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

public struct FreePortError: Error, CustomStringConvertible {
    public var errno: Int32
    public var description: String { "cannot find a free port on 127.0.0.1: \(String(cString: strerror(self.errno)))" }
}
