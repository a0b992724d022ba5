// SPDX-License-Identifier: Apache-2.0
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// The control endpoints a test server answers beside what it plays (`/_stats`, `/_log`,
/// `/_config`…): plain HTTP on 127.0.0.1, JSON both ways, and a failure that names the server.
struct ControlEndpoint: Sendable {
    /// How a failure names the server: "the git server".
    let name: String
    /// `http://127.0.0.1:PORT`.
    let origin: String

    init(_ name: String, port: Int) {
        self.name = name
        origin = "http://127.0.0.1:\(port)"
    }

    /// The answer to `path`: a GET, or a POST of `body` as JSON; anything but 200 fails the test.
    func data(_ path: String, body: Data? = nil) async throws -> Data {
        var request = URLRequest(url: URL(string: origin + path)!)
        if let body {
            request.httpMethod = "POST"
            request.httpBody = body
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, answer) = try await URLSession.shared.data(for: request)
        guard (answer as? HTTPURLResponse)?.statusCode == 200 else {
            Issue.record("\(name) answered \(path) with \(String(decoding: data, as: UTF8.self))")
            throw CocoaError(.fileReadUnknown)
        }
        return data
    }

    /// `/_stats`, decoded as `type`.
    func stats<Stats: Decodable>(_ type: Stats.Type) async throws -> Stats {
        try JSONDecoder().decode(type, from: try await data("/_stats"))
    }

    /// `/_log`: one object per request the server logged, in order.
    func log() async throws -> [[String: Any]] {
        try await JSONSerialization.jsonObject(with: data("/_log")) as? [[String: Any]] ?? []
    }

    /// Posts `settings` to `/_config`.
    func configure(_ settings: Data) async throws {
        _ = try await data("/_config", body: settings)
    }
}
