import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A Unix stream socket listening at `path`, for the tests' stand-ins of a bus.
func listeningUnixSocket(at path: String, backlog: Int32) throws -> Int32 {
    let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { buffer in
        for (index, byte) in path.utf8.enumerated() { buffer[index] = byte }
    }
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    try #require(bound == 0 && listen(descriptor, backlog) == 0, "cannot listen on \(path)")
    return descriptor
}

/// The processes with a TCP socket listening on 127.0.0.1:`port`, found as `ss -ltnp` finds
/// them: the socket's inode in /proc/net/tcp, then the descriptors of every process.
func processesListening(onPort port: Int) -> [pid_t] {
    guard let table = try? String(contentsOfFile: "/proc/net/tcp", encoding: .utf8) else { return [] }
    var hexPort = String(port, radix: 16, uppercase: true)
    while hexPort.count < 4 { hexPort = "0" + hexPort }
    let local = "0100007F:" + hexPort
    var inodes: [String] = []
    for line in table.split(separator: "\n").dropFirst() {
        // sl, local_address, rem_address, st (0A: LISTEN), tx:rx, tr:when, retrnsmt, uid, timeout, inode
        let fields = line.split(separator: " ")
        if fields.count > 9, fields[1] == local, fields[3] == "0A" { inodes.append("socket:[\(fields[9])]") }
    }
    guard !inodes.isEmpty else { return [] }
    var owners: [pid_t] = []
    for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
        guard let pid = pid_t(entry) else { continue }
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(entry)/fd")) ?? []
        if descriptors.contains(where: { inodes.contains((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(entry)/fd/\($0)")) ?? "") }) {
            owners.append(pid)
        }
    }
    return owners
}

/// Whether the process's environment holds `entry` (`NAME=value`).
func process(_ pid: pid_t, hasEnvironment entry: String) -> Bool {
    guard let environment = FileManager.default.contents(atPath: "/proc/\(pid)/environ") else { return false }
    return environment.split(separator: 0).contains { Array($0) == Array(entry.utf8) }
}
