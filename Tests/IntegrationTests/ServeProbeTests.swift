import AuthController
import DesktopSandbox
import Foundation
import Testing

/// `authctl serve` (SPEC §11) under faults and misuse: what a signal, a hostile peer or a
/// failing server must not break. Each test has a sandbox of its own, as `serve` owns one name
/// per bus.
@Suite("serve under faults and misuse")
struct ServeProbeTests {
    /// A private bus and keyring, a scenario in it, and a running `serve` that owns its name.
    func serving(_ arguments: [String] = []) async throws -> (DesktopSandbox, Scenario, Spawned) {
        let sandbox = try await DesktopSandbox.started(startupTimeout: 20)
        let scenario = try await Scenario(sandbox: sandbox)
        let serve = try await scenario.start(["serve"] + arguments)
        let owned = try await scenario.gdbus("wait", "--session", "--timeout", "20", LoginService.busName)
        #expect(owned.status == 0, "\(owned)\n\(serve.stderr)")
        return (sandbox, scenario, serve)
    }

    @Test("SIGTERM while a background refresh is under way: serve stores the rotated tokens before it exits")
    func terminatedDuringBackgroundRefresh() async throws {
        let server = try TokenServer()
        try server.configure(["accounts": ["alice": "pw"], "access_lifetime": 2])
        let (sandbox, scenario, serve) = try await serving()
        defer { sandbox.stop() }
        try await scenario.authctl("sign-in", "alice", "--server", server.oauth2, "--password-stdin", stdin: "pw").expect(0)
        // The server rotates the refresh token as it answers, a second after the request came.
        try server.configure(["refresh_delay": 1.5, "access_lifetime": 300])
        let giveUp = Date().addingTimeInterval(20)
        while try server.count("refresh") == 0 && Date() < giveUp { usleep(20_000) }
        #expect(try server.count("refresh") == 1, "serve refreshed the 2 s token at 80% of its lifetime")
        serve.signal(SIGTERM)
        let ended = await serve.wait(timeout: 30)
        #expect(ended.status == 0, "\(ended)")
        // The token serve received is the one stored: no further refresh, and the server takes it.
        let token = try await scenario.authctl("token")
        #expect(token.status == 0, "\(token)")
        #expect(try server.accepts(token.output) && server.count("refresh") == 1)
    }
}
