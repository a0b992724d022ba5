// SPDX-License-Identifier: Apache-2.0
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
