// SPDX-License-Identifier: Apache-2.0
import Foundation
import TestSupport
import Testing

/// A certificate authority of the test's own and a server certificate it signed for one host
/// name, made with Debian's `openssl`: the identity provider serves HTTPS with it, and authctl
/// trusts the authority only inside a mount namespace (``Scenario/trusting(_:hosts:)``), so
/// that TLS is verified end to end, as against a real provider, without touching the system.
struct TestCertificates {
    let folder: URL
    let hostName: String
    var authority: String { folder.appendingPathComponent("ca.pem").path }
    var certificate: String { folder.appendingPathComponent("server.pem").path }
    var key: String { folder.appendingPathComponent("server.key").path }

    init(hostName: String) async throws {
        self.hostName = hostName
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("authctl-pki-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let openssl = try which("openssl", package: "openssl")
        let path = folder.path
        try "subjectAltName=DNS:\(hostName)\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n"
            .write(toFile: path + "/server.ext", atomically: true, encoding: .utf8)
        for arguments in [
            ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", path + "/ca.key", "-out", path + "/ca.pem", "-days", "2",
             "-subj", "/CN=authctl test authority", "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
            ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", path + "/server.key", "-out", path + "/server.csr", "-subj", "/CN=\(hostName)"],
            ["x509", "-req", "-in", path + "/server.csr", "-CA", path + "/ca.pem", "-CAkey", path + "/ca.key", "-CAcreateserial",
             "-out", path + "/server.pem", "-days", "2", "-extfile", path + "/server.ext"],
        ] {
            let run = try await runProcess(openssl, arguments, input: nil, environment: ProcessInfo.processInfo.environment, timeout: 60)
            try #require(run.status == 0, "openssl \(arguments.joined(separator: " ")): \(run)")
        }
    }

    /// A hosts file that names `hostName` 127.0.0.1, beside the certificates.
    func hostsFile() throws -> String {
        let path = folder.appendingPathComponent("hosts").path
        try "127.0.0.1\tlocalhost\n127.0.0.1\t\(hostName)\n".write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}

/// `unshare -m` with files bind-mounted over system ones for the one program it starts, then
/// `exec`: the program (a proxy with its own `/etc/hosts`, authctl with the test authority as the
/// system's CA bundle) sees them, and nothing else on the machine does.
func mountNamespaceLauncher(binding files: [(file: String, over: String)]) throws -> [String] {
    let unshare = try which("unshare", package: "util-linux")
    // "$1" "$2" … are the pairs, then "--" and the program; sh's positional parameters keep any
    // path safe from word splitting.
    var script = ""
    for index in files.indices { script += "mount --bind \"$\(2 * index + 1)\" \"$\(2 * index + 2)\" && " }
    script += "shift \(2 * files.count) && exec \"$@\""
    return [unshare, "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script, "mount-namespace"]
        + files.flatMap { [$0.file, $0.over] }
}

/// A forward proxy of Debian's, in front of the test servers, in a mount namespace where only
/// it resolves the provider's host name (its own `/etc/hosts`), so that a request that does not
/// go through it cannot reach the provider by that name. Its log says what went through it.
final class ForwardProxy: Sendable {
    enum Kind: String, Sendable { case tinyproxy, squid }

    let kind: Kind
    let port: Int
    let folder: URL
    private let process: Spawned

    /// Starts `kind` on 127.0.0.1, resolving `hosts` (a hosts file) itself; with `users`, squid
    /// asks for one of them (Basic, through its `basic_ncsa_auth`). Returns once it accepts
    /// connections.
    init(_ kind: Kind, hosts: String, users: [(user: String, password: String)] = []) async throws {
        precondition(users.isEmpty || kind == .squid, "proxy authentication is squid's here")
        self.kind = kind
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("authctl-\(kind.rawValue)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        // squid's workers run as the user `proxy`, and write their logs here.
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: folder.path)
        var lastFailure = ""
        for _ in 0..<5 {
            let port = try Self.unusedPort()
            let program: [String]
            switch kind {
            case .tinyproxy:
                try """
                    Port \(port)
                    Listen 127.0.0.1
                    Timeout 120
                    MaxClients 100
                    LogFile "\(folder.path)/proxy.log"
                    LogLevel Connect

                    """.write(toFile: folder.path + "/proxy.conf", atomically: true, encoding: .utf8)
                program = [try which("tinyproxy", package: "tinyproxy"), "-d", "-c", folder.path + "/proxy.conf"]
            case .squid:
                var authentication = ""
                if !users.isEmpty {
                    var lines = ""
                    for (user, password) in users {
                        let hashed = try await runProcess(try which("openssl", package: "openssl"), ["passwd", "-1", "-stdin"],
                                                          input: Array(password.utf8), environment: ProcessInfo.processInfo.environment, timeout: 30)
                        lines += "\(user):\(hashed.output)\n"
                    }
                    try lines.write(toFile: folder.path + "/htpasswd", atomically: true, encoding: .utf8)
                    try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: folder.path + "/htpasswd")
                    authentication = """
                        auth_param basic program /usr/lib/squid/basic_ncsa_auth \(folder.path)/htpasswd
                        auth_param basic realm authctl-test
                        acl signed proxy_auth REQUIRED
                        http_access allow signed

                        """
                }
                try """
                    http_port 127.0.0.1:\(port)
                    visible_hostname authctl-test
                    pid_filename none
                    cache deny all
                    cache_mem 8 MB
                    coredump_dir \(folder.path)
                    cache_log \(folder.path)/cache.log
                    access_log stdio:\(folder.path)/proxy.log
                    logfile_rotate 0
                    netdb_filename none
                    shutdown_lifetime 0 seconds
                    hosts_file /etc/hosts
                    \(authentication)\(users.isEmpty ? "http_access allow all" : "http_access deny all")

                    """.write(toFile: folder.path + "/proxy.conf", atomically: true, encoding: .utf8)
                program = [try which("squid", package: "squid"), "-N", "-f", folder.path + "/proxy.conf"]
            }
            let launcher = try mountNamespaceLauncher(binding: [(hosts, "/etc/hosts")])
            let process = try await Spawned(launcher[0], Array(launcher.dropFirst()) + program, input: nil,
                                            environment: ProcessInfo.processInfo.environment, leadsProcessGroup: true)
            let listening = await eventually(within: .seconds(60), pollingEvery: .milliseconds(50)) {
                process.hasEnded || Self.accepts(port: port)
            }
            if listening && !process.hasEnded {
                self.process = process
                self.port = port
                return
            }
            process.signal(SIGKILL)
            let run = await process.wait(timeout: 10)
            let log = (try? String(contentsOfFile: folder.path + (kind == .squid ? "/cache.log" : "/proxy.log"), encoding: .utf8)) ?? ""
            lastFailure = "\(run)\n\(log.suffix(2000))"
        }
        Issue.record("\(kind.rawValue) did not start: \(lastFailure)")
        throw CocoaError(.fileReadUnknown)
    }

    deinit {
        process.signal(SIGTERM)
        try? FileManager.default.removeItem(at: folder)
    }

    /// The proxy as a variable names it: `http://[USER:PASSWORD@]127.0.0.1:PORT`.
    func url(user: String? = nil, password: String? = nil) -> String {
        let credentials = user.map { "\($0)\(password.map { ":" + $0 } ?? "")@" } ?? ""
        return "http://\(credentials)127.0.0.1:\(port)"
    }

    /// The `CONNECT` requests the proxy has logged, as `HOST:PORT`, in order. Their lines are
    /// written as each tunnel opens (tinyproxy) or ends (squid): a test awaits the count it expects.
    func tunnels() -> [String] {
        let log = (try? String(contentsOfFile: folder.path + "/proxy.log", encoding: .utf8)) ?? ""
        return log.split(separator: "\n").compactMap { line -> String? in
            switch kind {
            case .tinyproxy:
                // `CONNECT   Nov 29 … [pid]: Request (file descriptor 6): CONNECT host:port HTTP/1.1`
                guard let range = line.range(of: "): CONNECT ") else { return nil }
                return line[range.upperBound...].split(separator: " ").first.map(String.init)
            case .squid:
                // `time elapsed client TCP_TUNNEL/200 bytes CONNECT host:port user HIER/peer -`
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                guard let method = fields.firstIndex(of: "CONNECT"), method + 1 < fields.count else { return nil }
                return String(fields[method + 1])
            }
        }
    }

    /// Every line of the proxy's log (squid: its access log), for a failure's message.
    func log() -> String { (try? String(contentsOfFile: folder.path + "/proxy.log", encoding: .utf8)) ?? "" }

    /// A port nobody listens on now (the kernel's pick for a socket bound and closed).
    static func unusedPort() throws -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw POSIXError(.EMFILE) }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) == 0 && getsockname(socket, $0, &length) == 0 }
        }
        guard bound else { throw POSIXError(.EADDRINUSE) }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Whether something accepts a TCP connection on 127.0.0.1:`port`.
    static func accepts(port: Int) -> Bool {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { return false }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}
