import AuthController
import Foundation
import Testing

/// `authctl` against the test token server at the edges of a session's life: a server that
/// issues no refresh token.
@Suite("Remote accounts: no refresh token")
struct RemoteAccountEdgeTests {
    func json(_ run: Run) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(run.stdout.utf8))) as? [String: Any] ?? [:]
    }

    /// The access token's expiry as `status --json` reports it (whole seconds), in µs.
    func accessExpiry(_ scenario: Scenario) async throws -> UInt64 {
        let expiry = try #require(json(try await scenario.authctl("status", "--json"))["accessTokenExpiresAt"] as? String)
        return try #require(Timestamp.microseconds(rfc3339: expiry))
    }

    @Test("a server that issues no refresh token: the token is used while it lives, never refreshed; the session ends when it expires")
    func noRefreshToken() async throws {
        let server = try await TokenServer()
        try server.configure(["accounts": ["alice": "pw"], "access_lifetime": 20, "issue_refresh": false])
        let scenario = try await Scenario()
        try await scenario.authctl("sign-in", "alice", "--server", server.oauth2, "--password-stdin", stdin: "pw").expect(0)
        let expiresAt = try await accessExpiry(scenario)

        var run = try await scenario.authctl("token", "--refresh")
        let token = run.output
        #expect(run.status == 0, "\(run)")
        #expect(try server.accepts(token), "\(run)")
        #expect(run.stderr.contains("cannot be renewed"), "\(run)")

        // 8–9 s left of 20: due (the threshold is half the lifetime), printed as it is.
        try await sleepUntilWallClock(expiresAt - 8_000_000)
        run = try await scenario.authctl("token")
        #expect(run.status == 0, "\(run)")
        #expect(run.output == token, "\(run)")
        #expect(try await scenario.authctl("status").status == 0)

        let listener = try scenario.listener()
        try await sleepUntilWallClock(expiresAt + 1_000_000)
        run = try await scenario.authctl("token")
        #expect(run.status == 77, "\(run)")
        #expect(run.stderr.contains("sign in again"), "\(run)")
        let events = try await collect(1, from: listener)
        #expect(events.map(\.reason) == [.expired])
        #expect(try await scenario.authctl("status").status == 1)
        #expect(try await scenario.secretTool("search", "service", scenario.service).stdout.isEmpty)
        #expect(try server.count("refresh") == 0)
    }
}
