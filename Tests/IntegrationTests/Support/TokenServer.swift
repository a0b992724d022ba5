// SPDX-License-Identifier: Apache-2.0
import Foundation
import Testing

/// The test token server (`token_server.py` beside this file) on 127.0.0.1, started by the
/// test that needs it and stopped with it: a real HTTP server speaking both protocols, with
/// knobs and a request log.
final class TokenServer: Sendable {
    private let server: ServerProcess
    var port: Int { server.port }

    /// Starts the server and returns once it accepts connections, at most 60 s after its turn
    /// among ``ServerStarts``: the suite starts dozens at once, and under load a Python that
    /// imports its modules beside twenty others took over 20 s.
    /// - Parameter tls: a certificate and key file: the server speaks HTTPS with them.
    init(tls: (certificate: String, key: String)? = nil) async throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("token_server.py").path
        server = try await ServerProcess("token server", executable: try which("python3", package: "python3"),
                                         arguments: [script] + (tls.map { ["--tls", $0.certificate, $0.key] } ?? []), within: .seconds(60),
                                         slow: true)
    }

    func stop() { server.stop() }

    /// The oauth2 token endpoint and revocation URL, and the json API's base.
    var oauth2: String { "http://127.0.0.1:\(port)/oauth/token" }
    var revoke: String { "http://127.0.0.1:\(port)/oauth/revoke" }
    var json: String { "http://127.0.0.1:\(port)/api" }

    /// Merges `settings` into the server's configuration (see `token_server.py`).
    func configure(_ settings: [String: Any]) throws {
        _ = try request("POST", "/_config", body: try JSONSerialization.data(withJSONObject: settings))
    }

    /// Every request so far: `endpoint` (login, register, refresh, revoke), `fields`, `authorization`, `headers`,
    /// `time` (seconds since the epoch, when it arrived).
    func log() throws -> [[String: Any]] {
        try JSONSerialization.jsonObject(with: request("GET", "/_log")) as? [[String: Any]] ?? []
    }

    func count(_ endpoint: String) throws -> Int { try log().filter { $0["endpoint"] as? String == endpoint }.count }

    /// The refresh tokens the server would still accept (issued, neither rotated, revoked nor expired).
    func liveRefreshTokens() throws -> [String] {
        try JSONSerialization.jsonObject(with: request("GET", "/_live")) as? [String] ?? []
    }

    /// Whether the server takes `token` as a valid access token.
    func accepts(_ token: String) throws -> Bool {
        let query = token.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        let answer = try JSONSerialization.jsonObject(with: request("GET", "/_accepts?token=\(query)")) as? [String: Any]
        return answer?["accepted"] as? Bool ?? false
    }

    /// One request to the control endpoints, over a plain socket: the tests' HTTP must not be
    /// the code under test.
    private func request(_ method: String, _ path: String, body: Data = Data()) throws -> Data {
        let handle = try connect()
        defer { try? handle.close() }
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: \(body.count)\r\n\r\n"
        if method == "GET" { head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" }
        try handle.write(contentsOf: Data(head.utf8) + body)
        let answer = try handle.readToEnd() ?? Data()
        guard let split = answer.range(of: Data("\r\n\r\n".utf8)) else { return Data() }
        return answer[split.upperBound...]
    }

    private func connect() throws -> FileHandle {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Foundation.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(descriptor)
            throw CocoaError(.fileReadUnknown)
        }
        return FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
    }
}
