// SPDX-License-Identifier: Apache-2.0
import AuthController
import AuthControllerTesting
import Foundation
import Synchronization
import TestSupport
import Testing

@Suite("Bound services: tokens")
struct BoundServiceTests {
    @Test("sign-in stores the tokens and their times, binds the service, one event; status reads no secret")
    func signIn() async throws {
        let fixture = try BoundFixture()
        let outcome = try await fixture.signIn()
        #expect(outcome.events.map(\.reason) == [.signIn])
        let status = try fixture.controller.status()
        #expect(status.account == fixture.alice)
        #expect(status.server == fixture.binding.server)
        #expect(status.accessTokenExpiresAt == Timestamp.date(microseconds: fixture.clock.read() + 300_000_000))
        #expect(status.refreshTokenExpiresAt == Timestamp.date(microseconds: fixture.clock.read() + 3_600_000_000))
        let stored = try #require(try fixture.keyring.value(TokenSet.self, service: fixture.service, account: fixture.alice, server: fixture.binding.server))
        #expect(fixture.server.accepts(accessToken: stored.accessToken))
        #expect(try fixture.keyring.secret(service: fixture.service, account: fixture.alice) == nil)  // no password hash
        #expect(try fixture.controller.accounts().map(\.id) == [fixture.alice])
    }

    @Test("a wrong password is 77 and changes nothing; a failed sign-in with --server keeps no binding")
    func wrongPassword() async throws {
        let fixture = try BoundFixture()
        await #expect(throws: AuthError.self) { try await fixture.signIn(nil, "nope") }
        #expect(try fixture.controller.binding() == nil)
        #expect(fixture.broadcaster.events.isEmpty)
        #expect(fixture.settings.saveCount == 0)
        do { _ = try await fixture.signIn(nil, "nope") } catch let error as AuthError { #expect(error.exitCode == 77) }
    }

    @Test("a fresh token is handed out without asking the server")
    func freshToken() async throws {
        let fixture = try BoundFixture()
        try await fixture.signIn()
        let requests = fixture.server.requests.count
        let token = try await fixture.controller.accessToken()
        #expect(fixture.server.requests.count == requests)
        #expect(fixture.server.accepts(accessToken: token.token))
        #expect(token.expiresAt == Timestamp.date(microseconds: fixture.clock.read() + 300_000_000))
    }

    @Test("refreshed ahead of expiry: --min-valid, capped at half the granted lifetime; the rotated refresh token is stored")
    func refreshAhead() async throws {
        let fixture = try BoundFixture()
        try await fixture.signIn()
        fixture.clock.advance(seconds: 200)  // 100 s left
        _ = try await fixture.controller.accessToken(minValid: .seconds(60))
        #expect(fixture.refreshes == 0)
        _ = try await fixture.controller.accessToken(minValid: .seconds(120))  // 100 s left < 120 s (under the 150 s cap)
        #expect(fixture.refreshes == 1)
        let fixture2 = try BoundFixture()
        try await fixture2.signIn()
        fixture2.clock.advance(seconds: 200)
        let before = try #require(try fixture2.keyring.value(TokenSet.self, service: fixture2.service, account: fixture2.alice, server: fixture2.binding.server))
        let token = try await fixture2.controller.accessToken(minValid: .seconds(1000))  // capped at 150 s: 100 s left → due
        #expect(fixture2.refreshes == 1)
        #expect(fixture2.server.accepts(accessToken: token.token))
        #expect(token.token != before.accessToken)
        let after = try #require(try fixture2.keyring.value(TokenSet.self, service: fixture2.service, account: fixture2.alice, server: fixture2.binding.server))
        #expect(after.refreshToken != before.refreshToken)
        #expect(after.accessToken == token.token)
        _ = try await fixture2.controller.accessToken(minValid: .seconds(1000))
        #expect(fixture2.refreshes == 1)  // the new token has 300 s, more than the 150 s cap
        #expect(fixture2.broadcaster.events.count == 1)  // a refresh is no event
    }

    @Test("twelve tasks asking at once for an expired token: one refresh, one token the server accepts")
    func singleFlightAcrossTasks() async throws {
        let fixture = try BoundFixture()
        try await fixture.signIn()
        fixture.server.configure { $0.delay = .milliseconds(200) }
        fixture.clock.advance(seconds: 400)  // expired
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<12 { group.addTask { try await fixture.controller.accessToken().token } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(fixture.refreshes == 1)
        #expect(tokens.count == 1)
        #expect(fixture.server.accepts(accessToken: tokens.first!))
    }

    @Test("a refresh token the server refuses ends the session: item gone, user cleared, one `expired` event, 77")
    func refusedRefresh() async throws {
        let fixture = try BoundFixture()
        try await fixture.signIn()
        fixture.server.revokeAllRefreshTokens()
        await #expect { try await fixture.controller.accessToken(forceRefresh: true) } throws: { ($0 as? AuthError)?.exitCode == 77 }
        #expect(fixture.trail == ["signed-in alice@example.org sign-in", "signed-out alice@example.org expired"])
        #expect(try fixture.controller.status().isSignedIn == false)
        #expect(try fixture.keyring.value(TokenSet.self, service: fixture.service, account: fixture.alice, server: fixture.binding.server) == nil)
        #expect(try fixture.controller.binding() == fixture.binding)  // the binding outlives the session
        await #expect { try await fixture.controller.accessToken() } throws: { ($0 as? AuthError)?.exitCode == 1 }
    }

    @Test("a refresh token past its expiry ends the session without asking the server")
    func refreshTokenExpired() async throws {
        let fixture = try BoundFixture()
        try await fixture.signIn()
        fixture.clock.advance(seconds: 3601)
        #expect(try fixture.controller.status().isSignedIn == false)
        #expect(try fixture.controller.accounts().map(\.isCurrent) == [false])
        let requests = fixture.server.requests.count
        await #expect { try await fixture.controller.accessToken() } throws: { ($0 as? AuthError)?.exitCode == 77 }
        #expect(fixture.server.requests.count == requests)
        #expect(fixture.trail.last == "signed-out alice@example.org expired")
    }

    @Test("the server failing: a token that is still valid is handed out with a warning; an expired one is the error", arguments: [
        InMemoryTokenServer.Scripted.answer(status: 503, body: "down"),
        .connectionFailure(.unavailable("connection refused")),
        .connectionFailure(.temporaryFailure("timed out")),
        .answer(status: 200, body: "<html>"),
    ])
    func serverFailing(_ failure: InMemoryTokenServer.Scripted) async throws {
        let fixture = try BoundFixture()
        try await fixture.signIn()
        fixture.clock.advance(seconds: 280)  // 20 s left, due for the default 60 s
        fixture.server.configure { $0.scripted = [failure] }
        let token = try await fixture.controller.accessToken()
        #expect(token.warnings.count == 1)
        #expect(fixture.server.accepts(accessToken: token.token))
        fixture.clock.advance(seconds: 30)  // expired
        fixture.server.configure { $0.scripted = [failure] }
        await #expect { try await fixture.controller.accessToken() } throws: { error in
            guard let code = (error as? AuthError)?.exitCode else { return false }
            return [69, 75, 76].contains(code)
        }
        #expect(fixture.trail.count == 1)  // still signed in
    }

    @Test("a server clock three hours ahead or behind changes nothing visible", arguments: [Int64(3 * 3600), Int64(-3 * 3600)])
    func clockOffset(_ offset: Int64) async throws {
        for tokenProtocol in [ServerBinding.TokenProtocol.oauth2, .json] {
            let fixture = try BoundFixture(tokenProtocol)
            fixture.server.configure { $0.clockOffset = .seconds(offset) }
            try await fixture.signIn()
            let status = try fixture.controller.status()
            let now = fixture.clock.read()
            // Within the second the Date header cannot resolve.
            #expect(abs(Int64(Timestamp.microseconds(status.accessTokenExpiresAt!)) - Int64(now + 300_000_000)) <= 1_000_000, "\(tokenProtocol)")
            #expect(abs(Int64(Timestamp.microseconds(status.refreshTokenExpiresAt!)) - Int64(now + 3_600_000_000)) <= 1_000_000, "\(tokenProtocol)")
            fixture.clock.advance(seconds: 200)
            _ = try await fixture.controller.accessToken()
            #expect(fixture.refreshes == 0, "\(tokenProtocol)")
            fixture.clock.advance(seconds: 60)
            _ = try await fixture.controller.accessToken()
            #expect(fixture.refreshes == 1, "\(tokenProtocol)")
        }
    }

    @Test("a JWT's exp schedules the refresh when the answer gives no expiry")
    func jwtExpiry() async throws {
        let fixture = try BoundFixture()
        fixture.server.configure { $0.jwtAccessTokens = true }
        try await fixture.signIn()
        #expect(try fixture.controller.status().accessTokenExpiresAt != nil)
        fixture.clock.advance(seconds: 290)
        _ = try await fixture.controller.accessToken()
        #expect(fixture.refreshes == 1)
    }

    @Test("an unknown expiry is never refreshed ahead; --refresh forces one")
    func unknownExpiry() async throws {
        let fixture = try BoundFixture()
        fixture.server.configure { $0.accessLifetime = nil }
        try await fixture.signIn()
        fixture.clock.advance(seconds: 100_000)
        fixture.server.configure { $0.refreshLifetime = nil }
        _ = try? await fixture.controller.accessToken()
        #expect(fixture.refreshes == 0)
    }

    @Test("an answer whose token is already due is used as it is: one refresh per call")
    func noRefreshLoop() async throws {
        let fixture = try BoundFixture()
        fixture.server.configure { $0.accessLifetime = .zero }
        try await fixture.signIn()
        _ = try await fixture.controller.accessToken()
        #expect(fixture.refreshes == 1)
        _ = try await fixture.controller.accessToken()
        #expect(fixture.refreshes == 2)
    }

    @Test("sign-out deletes the tokens and revokes the refresh token; the binding stays; --keep-credentials revokes nothing")
    func signOutRevokes() async throws {
        let fixture = try BoundFixture(revoke: true)
        try await fixture.signIn()
        let tokens = try #require(try fixture.keyring.value(TokenSet.self, service: fixture.service, account: fixture.alice, server: fixture.binding.server))
        let outcome = try await fixture.controller.signOut(keepingCredentials: false)
        #expect(outcome.events.map(\.reason) == [.signOut])
        #expect(outcome.warnings.isEmpty)
        #expect(fixture.server.requests.last == InMemoryTokenServer.LoggedRequest(
            endpoint: "revoke", fields: ["token": tokens.refreshToken!, "token_type_hint": "refresh_token", "client_id": "cli"], authorization: nil))
        #expect(try fixture.controller.binding() == fixture.binding)
        try await fixture.signIn()
        try await fixture.signIn(fixture.bob, "pw2")
        let kept = try await fixture.controller.signOut(keepingCredentials: true)
        #expect(kept.events.count == 1)
        #expect(fixture.server.requests.last?.endpoint == "login")
    }

    @Test("a revocation that fails is a warning; the sign-out stands")
    func revocationFails() async throws {
        let fixture = try BoundFixture(revoke: true)
        try await fixture.signIn()
        fixture.server.configure { $0.scripted = [.connectionFailure(.unavailable("connection refused"))] }
        let outcome = try await fixture.controller.signOut(keepingCredentials: false)
        #expect(outcome.events.count == 1)
        try #require(outcome.warnings.count == 1)
        #expect(outcome.warnings[0].description.contains("not revoked"))
        #expect(try fixture.controller.status().isSignedIn == false)
    }

    @Test("the binding cannot change while someone is signed in (65); a switch on one binding is two events")
    func bindingRules() async throws {
        let fixture = try BoundFixture()
        try await fixture.signIn()
        #expect { try fixture.controller.setBinding(nil) } throws: { ($0 as? AuthError)?.exitCode == 65 }
        let other = ServerBinding(server: try ServerURL(validating: "https://elsewhere.test/token"))
        await #expect {
            try await fixture.controller.signIn(account: fixture.bob, name: "", password: try Password("pw2"), binding: other)
        } throws: { ($0 as? AuthError)?.exitCode == 65 }
        try await fixture.signIn(fixture.bob, "pw2")
        #expect(fixture.trail == ["signed-in alice@example.org sign-in", "signed-out alice@example.org switch", "signed-in bob switch"])
        try await fixture.controller.signOut(keepingCredentials: false)
        // The switch kept alice's tokens: unbinding would put them out of reach until forgotten.
        #expect { try fixture.controller.setBinding(nil) } throws: { ($0 as? AuthError)?.exitCode == 65 }
        try await fixture.controller.forget(fixture.alice)
        try fixture.controller.setBinding(nil)
        #expect(try fixture.controller.binding() == nil)
    }

    @Test("json protocol: register, then sign in; 409 when the account exists")
    func jsonRegister() async throws {
        let fixture = try BoundFixture(.json)
        try await fixture.controller.signIn(account: AccountID(rawValue: "carol")!, name: "", password: try Password("pw3"), register: true,
                                            binding: fixture.binding)
        #expect(try fixture.controller.status().account?.rawValue == "carol")
        await #expect {
            try await fixture.controller.signIn(account: AccountID(rawValue: "carol")!, name: "", password: try Password("x"), register: true)
        } throws: { ($0 as? AuthError)?.exitCode == 65 }
    }

    @Test("verify sends the password; new tokens replace the old; no event")
    func verify() async throws {
        let fixture = try BoundFixture()
        try await fixture.signIn()
        let before = try fixture.keyring.value(TokenSet.self, service: fixture.service, account: fixture.alice, server: fixture.binding.server)
        try await fixture.controller.verify(try Password("pw"))
        let after = try fixture.keyring.value(TokenSet.self, service: fixture.service, account: fixture.alice, server: fixture.binding.server)
        #expect(before != after)
        #expect(fixture.broadcaster.events.count == 1)
        await #expect { try await fixture.controller.verify(try Password("bad")) } throws: { ($0 as? AuthError)?.exitCode == 77 }
    }

    @Test("tokens removed from the keyring behind authctl's back: `token` ends the session with `removed`")
    func tokensRemoved() async throws {
        let fixture = try BoundFixture()
        try await fixture.signIn()
        try fixture.keyring.delete(service: fixture.service, account: fixture.alice, server: fixture.binding.server)
        await #expect { try await fixture.controller.accessToken() } throws: { ($0 as? AuthError)?.exitCode == 1 }
        #expect(fixture.trail.last == "signed-out alice@example.org removed")
    }

    @Test("a rotated refresh token that cannot be stored: the error says the session may have to be signed in again")
    func rotatedTokenNotStored() async throws {
        let fixture = try BoundFixture()
        try await fixture.signIn()
        fixture.keyring.failStores(with: .temporaryFailure("the Secret Service did not answer"))
        await #expect {
            try await fixture.controller.accessToken(forceRefresh: true)
        } throws: { error in
            guard let error = error as? AuthError else { return false }
            return error.exitCode == 75 && error.message.contains("signed in again")
        }
    }

    @Test("a locked keyring with no prompt possible: token is 69, and no token goes anywhere else")
    func lockedKeyring() async throws {
        let fixture = try BoundFixture()
        try await fixture.signIn()
        fixture.keyring.setLocked(true)
        await #expect(throws: AuthError.keyringLocked) { try await fixture.controller.accessToken() }
    }

    @Test("a refusal after another process rotated the refresh token uses the rotated one instead of ending the session")
    func refusalAfterRotation() async throws {
        /// Plays the other process: while this one's refresh is on its way, the keyring gets
        /// rotated tokens, and the server refuses the old refresh token.
        final class RacingTransport: HTTPTransport {
            let keyring: InMemorySecretStore
            let key: ItemKey
            init(keyring: InMemorySecretStore, key: ItemKey) { self.keyring = keyring; self.key = key }
            func send(_ request: HTTPRequest, timeout: Duration) async throws(AuthError) -> HTTPResponse {
                try keyring.store(TokenSet(accessToken: "rotated-access", refreshToken: "rotated-refresh"), service: key.service,
                                  account: key.account, server: key.server, label: "t")
                return HTTPResponse(status: 400, body: Array(#"{"error":"invalid_grant"}"#.utf8))
            }
        }
        let fixture = try BoundFixture()
        try await fixture.signIn()
        let key = ItemKey(service: fixture.service, account: fixture.alice, server: fixture.binding.server)
        let controller = AuthController(service: fixture.service, keyring: fixture.keyring, settings: fixture.settings,
                                        broadcaster: fixture.broadcaster, notificationCenter: NotificationCenter(),
                                        tokenTransport: RacingTransport(keyring: fixture.keyring, key: key), clock: fixture.clock.date)
        let token = try await controller.accessToken(forceRefresh: true)
        #expect(token.token == "rotated-access")
        #expect(try controller.status().isSignedIn)
        #expect(!fixture.trail.contains { $0.hasSuffix("expired") })
    }
}
