// SPDX-License-Identifier: Apache-2.0
import AuthController
import Foundation
import TestSupport
import Testing

/// Tokens that a sign-in or `verify` replaces leave no refresh token live at the server: it is
/// revoked once the new tokens are stored, as at sign-out.
@Suite("replaced tokens are revoked")
struct ReplacedTokensTests {
    @Test("signing in again, signing in after --keep-credentials, and verify each leave one refresh token live")
    func noneLeftLive() async throws {
        let server = try await TokenServer()
        try server.configure(["accounts": ["alice": "pw"], "access_lifetime": 3600])
        let scenario = try await Scenario()
        try await scenario.authctl("server", "set", server.oauth2, "--revoke-url", server.revoke).expect(0)
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        #expect(try server.liveRefreshTokens().count == 1)

        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        #expect(try server.liveRefreshTokens().count == 1, "signing in again")

        try await scenario.authctl("sign-out", "--keep-credentials").expect(0)
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        #expect(try server.liveRefreshTokens().count == 1, "signing in over kept tokens")

        try await scenario.authctl("verify", "--password-stdin", stdin: "pw").expect(0)
        #expect(try server.liveRefreshTokens().count == 1, "verify")

        // The live one is the stored one: a refresh with it works.
        try await scenario.authctl("token", "--refresh").expect(0)
        try await scenario.authctl("forget", "alice").expect(0)
        #expect(try server.liveRefreshTokens().isEmpty)
    }

    @Test("a refresh answered after another account signed in: token says nobody is signed in (1) and the tokens it got are revoked")
    func refreshOvertakenBySignIn() async throws {
        let server = try await TokenServer()
        try server.configure(["accounts": ["alice": "pw", "bob": "pw"], "access_lifetime": 3600])
        let scenario = try await Scenario()
        try await scenario.authctl("server", "set", server.oauth2, "--revoke-url", server.revoke).expect(0)
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        // The answer comes late enough that bob's sign-in is done first, however loaded the machine.
        try server.configure(["refresh_delay": 15])
        let refreshing = try await scenario.start(["--server-timeout", "30", "token", "--refresh"])
        let asked = await eventually(within: .seconds(20)) { (try? server.count("refresh")) == 1 }
        try #require(asked, "the refresh never reached the server")
        // Started at once, not behind the suite's limit on processes running together, which on a
        // loaded machine could hold it past the refresh's answer.
        let bob = try await scenario.start(["sign-in", "bob", "--password-stdin"], input: Array("pw".utf8))
        let signedIn = await bob.wait(timeout: 60)
        #expect(signedIn.status == 0, "\(signedIn)")

        let run = await refreshing.wait(timeout: 60)
        #expect(run.status == 1, "\(run)")
        #expect(run.stderr.contains("was signed out of"), "\(run)")
        // alice's tokens stay kept (a switch keeps them); the refresh's new ones are revoked:
        // alice's kept one and bob's are all that is live.
        try await scenario.authctl("forget", "alice").expect(0)
        try await scenario.authctl("forget", "bob").expect(0)
        let live = try server.liveRefreshTokens()
        #expect(live.isEmpty, "\(live)")
    }
}
