// SPDX-License-Identifier: Apache-2.0
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// The scripted OpenID Connect provider (`scripted_provider.py` beside this file) on 127.0.0.1:
/// every endpoint answers as the test configures it, faults included, and every request is
/// logged. Its authorization endpoint redirects straight back, so the browser flow needs no
/// person: `scripted_browser` plays the browser.
final class ScriptedProvider: Sendable {
    private let server: ServerProcess
    var port: Int { server.port }

    /// The client id the tests bind with; the ID tokens' audience.
    static let clientID = "scripted-client"

    /// Starts the provider with the identity provider's Python (which has `cryptography` to sign
    /// ID tokens) and returns once it accepts connections, at most 60 s later once its start-up begins.
    init() async throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("scripted_provider.py").path
        server = try await ServerProcess("scripted provider", executable: try IdentityProvider.python(), arguments: [script],
                                         within: .seconds(60), slow: true)
    }

    func stop() { server.stop() }

    /// The issuer, as discovery spells it unless told otherwise.
    var issuer: String { "http://127.0.0.1:\(port)/p" }

    /// The program to give authctl as `BROWSER`.
    static var browser: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("scripted_browser").path
    }

    /// Merges `settings` into the provider's configuration (see `scripted_provider.py`).
    func configure(_ settings: [String: Any]) async throws {
        try await control.configure(try JSONSerialization.data(withJSONObject: settings))
    }

    /// Merges the configuration written as a JSON object.
    func configure(json: String) async throws {
        try await control.configure(Data(json.utf8))
    }

    /// Every request so far: `endpoint` (discovery, jwks, authorize, token, device, userinfo,
    /// revoke), `method`, `query`, `fields` (the form), `authorization`, `accept`, `userAgent`, `time` (seconds since the
    /// epoch, when it arrived), and for the token endpoint `grant` (code, device_poll, refresh) and
    /// `answered` (`tokens`, or the status of a scripted answer).
    func log() async throws -> [[String: Any]] { try await control.log() }

    /// The requests to the token endpoint with `grant`, in order.
    func tokenRequests(_ grant: String) async throws -> [[String: Any]] {
        try await log().filter { $0["endpoint"] as? String == "token" && $0["grant"] as? String == grant }
    }

    func count(_ endpoint: String) async throws -> Int {
        try await log().filter { $0["endpoint"] as? String == endpoint }.count
    }

    private var control: ControlEndpoint { ControlEndpoint("the scripted provider", port: port) }
}
