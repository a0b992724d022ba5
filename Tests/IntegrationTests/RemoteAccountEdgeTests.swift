// SPDX-License-Identifier: Apache-2.0
import AuthController
@testable import AuthControllerCore
import DesktopSandbox
import Foundation
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `authctl` against the test token server at the edges of a session's life: a server that
/// issues no refresh token, a refresh lock held by a refresher that stopped or hung, and tokens
/// kept at sign-out when the binding is to change. The token lives an hour, and each state a test
/// needs (due, expired) is written into the settings file: the verdict never depends on how fast a
/// loaded machine runs the commands.
@Suite("Remote accounts: no refresh token, a held refresh lock, kept tokens")
struct RemoteAccountEdgeTests {
    func json(_ run: Run) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(run.stdout.utf8))) as? [String: Any] ?? [:]
    }

    /// The access token's expiry as `status --json` reports it (whole seconds), in µs.
    func accessExpiry(_ scenario: Scenario) async throws -> UInt64 {
        let expiry = try #require(json(try await scenario.authctlNow("status", "--json"))["accessTokenExpiresAt"] as? String)
        return try #require(Timestamp.microseconds(rfc3339: expiry))
    }

    /// Whether another process holds an `flock` on the file at `path`.
    func isLockedElsewhere(_ path: String) -> Bool {
        let descriptor = open(path, O_RDWR | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        return flock(descriptor, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK
    }

    @Test("a server that issues no refresh token: the token is used while it lives, never refreshed; the session ends when it expires")
    func noRefreshToken() async throws {
        let server = try await TokenServer()
        try server.configure(["accounts": ["alice": "pw"], "access_lifetime": 3600, "issue_refresh": false])
        let sandbox = try await DesktopSandbox.started()
        defer { sandbox.stop() }
        let scenario = try await Scenario(sandbox: sandbox)
        try await scenario.authctl("sign-in", "alice", "--server", server.oauth2, "--password-stdin", stdin: "pw").expect(0)
        let expiresAt = try await accessExpiry(scenario)
        #expect(expiresAt > AuthController.systemClock() + 3_000_000_000, "the access token lives an hour")

        var run = try await scenario.authctl("token", "--refresh")
        let token = run.output
        #expect(!(try await scenario.secretTool("search", "service", scenario.service).stdout.isEmpty), "the keyring still holds the tokens")
        #expect(run.status == 0, "\(run)")
        #expect(try server.accepts(token), "\(run)")
        #expect(run.stderr.contains("cannot be renewed"), "\(run)")

        // A quarter of the hour left: due (the threshold is half the lifetime), printed as it is.
        try scenario.setAccessExpiry(AuthController.systemClock() + 900_000_000)
        run = try await scenario.authctl("token")
        #expect(run.status == 0, "\(run)")
        #expect(run.output == token, "\(run)")
        #expect(try await scenario.authctl("status").status == 0)

        let listener = try scenario.listener()
        try scenario.expireAccessToken()
        run = try await scenario.authctl("token")
        #expect(run.status == 77, "\(run)")
        #expect(run.stderr.contains("sign in again"), "\(run)")
        let events = try await collect(1, from: listener)
        #expect(events.map(\.reason) == [.expired])
        #expect(try await scenario.authctl("status").status == 1)
        #expect(try await scenario.secretTool("search", "service", scenario.service).stdout.isEmpty)
        #expect(try server.count("refresh") == 0)
    }

    @Test("the refresh lock held beyond the wait (a refresher stopped or hung): a still-valid token is printed with a warning (0); an expired one is 75")
    func refreshLockHeld() async throws {
        let server = try await TokenServer()
        try server.configure(["accounts": ["alice": "pw"], "access_lifetime": 3600])
        let sandbox = try await DesktopSandbox.started()
        defer { sandbox.stop() }
        let scenario = try await Scenario(sandbox: sandbox)
        try await scenario.authctl("sign-in", "alice", "--server", server.oauth2, "--password-stdin", stdin: "pw").expect(0)
        let stored = try await scenario.authctl("token").output
        // flock(1) holds the refresh lock, as a refresher stopped or hung would: a process of its
        // own with nothing open to this one (not a pipe, not a descriptor of the test process,
        // which the whole suite's process handling closed under it now and then).
        let lockPath = "\(scenario.settingsDirectory)/refresh-\(GLibText.md5Hex(scenario.service)).lock"
        let holder = try await Spawned(try which("flock", package: "util-linux"), [lockPath, "sleep", "600"], input: nil,
                                       environment: scenario.environment)
        defer { holder.signal(SIGKILL) }
        #expect(await eventually(within: .seconds(10)) { isLockedElsewhere(lockPath) }, "flock(1) took the lock")

        var run = try await scenario.authctlNow("--server-timeout", "1", "token", "--refresh")
        #expect(run.status == 0, "\(run)")
        #expect(run.output == stored, "\(run)")
        #expect(run.stderr.contains("still valid"), "\(run)")
        // The wait: the server deadline plus 5 s.
        #expect(run.seconds > 5.9, "\(run)")

        try scenario.expireAccessToken()
        #expect(isLockedElsewhere(lockPath), "flock(1) still holds the lock")
        run = try await scenario.authctlNow("--server-timeout", "1", "token")
        #expect(run.status == 75, "\(run)")
        #expect(run.stdout.isEmpty, "\(run)")
        #expect(try await scenario.authctlNow("status").status == 0, "the session itself goes on")
        #expect(try server.count("refresh") == 0, "the lock was never had, so the server was never asked")
    }

    @Test("tokens kept at sign-out: `server set` elsewhere, `server unset` and `sign-in --server` elsewhere are 65 naming them, until they are forgotten")
    func rebindingWithKeptTokens() async throws {
        let server = try await TokenServer()
        try server.configure(["accounts": ["alice": "pw", "bob": "pw"]])
        let sandbox = try await DesktopSandbox.started()
        defer { sandbox.stop() }
        let scenario = try await Scenario(sandbox: sandbox)
        try await scenario.authctl("sign-in", "alice", "--server", server.oauth2, "--password-stdin", stdin: "pw").expect(0)
        try await scenario.authctl("sign-out", "--keep-credentials").expect(0)
        let elsewhere = "http://127.0.0.1:1/token"

        var run = try await scenario.authctl("server", "set", elsewhere)
        #expect(run.status == 65, "\(run)")
        #expect(run.stderr.contains("`authctl forget alice`"), "\(run)")
        run = try await scenario.authctl("server", "unset")
        #expect(run.status == 65, "\(run)")
        #expect(run.stderr.contains("`authctl forget alice`"), "\(run)")
        run = try await scenario.authctl("sign-in", "bob", "--server", elsewhere, "--password-stdin", stdin: "pw")
        #expect(run.status == 65, "\(run)")
        #expect(run.stderr.contains("`authctl forget alice`"), "\(run)")
        run = try await scenario.authctl("server", "show", "--json")
        #expect(json(run)["server"] as? String == server.oauth2, "\(run)")
        run = try await scenario.authctl("accounts")
        #expect(run.stdout == "  alice\n", "\(run)")

        try await scenario.authctl("forget", "alice").expect(0)
        #expect(try await scenario.secretTool("search", "service", scenario.service).stdout.isEmpty)
        try await scenario.authctl("server", "set", elsewhere).expect(0)
    }
}
