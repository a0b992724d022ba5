import AuthController
import Foundation
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
}
