// SPDX-License-Identifier: Apache-2.0
import AuthController
@testable import AuthControllerCore
import AuthControllerTesting
import Foundation
import TestSupport
import Testing

/// Bound services at the edges of the token's life: a server that issues no refresh token, and
/// tokens kept at sign-out when the binding is to change.
@Suite("Bound services: no refresh token, kept tokens and rebinding")
struct BoundServiceEdgeTests {
    /// A fixture whose server answers without a refresh token, with alice signed in.
    func signedInWithoutRefreshToken(_ tokenProtocol: ServerBinding.TokenProtocol = .oauth2) async throws -> BoundFixture {
        let fixture = try BoundFixture(tokenProtocol)
        fixture.server.configure { $0.issuesRefreshTokens = false }
        try await fixture.signIn()
        return fixture
    }

    @Test("no refresh token: a due token is handed out as it is, and the server is never asked", arguments: [
        ServerBinding.TokenProtocol.oauth2, .json,
    ])
    func dueTokenWithoutRefreshToken(_ tokenProtocol: ServerBinding.TokenProtocol) async throws {
        let fixture = try await signedInWithoutRefreshToken(tokenProtocol)
        let requests = fixture.server.requests.count
        fixture.clock.advance(seconds: 280)  // 20 s left: due for the default 60 s
        let token = try await fixture.controller.accessToken()
        #expect(fixture.server.accepts(accessToken: token.token))
        #expect(token.warnings.isEmpty)
        #expect(fixture.server.requests.count == requests)
        #expect(fixture.trail == ["signed-in alice@example.org sign-in"])
    }

    @Test("no refresh token: a forced refresh hands the token out with a warning that it cannot be renewed")
    func forcedRefreshWithoutRefreshToken() async throws {
        let fixture = try await signedInWithoutRefreshToken()
        let requests = fixture.server.requests.count
        let token = try await fixture.controller.accessToken(forceRefresh: true)
        #expect(fixture.server.accepts(accessToken: token.token))
        #expect(token.warnings.count == 1)
        #expect(token.warnings.first?.description.contains("cannot be renewed") == true)
        #expect(fixture.server.requests.count == requests)
        #expect(try fixture.controller.status().isSignedIn)
    }

    @Test("no refresh token: the session ends when the access token expires, not before — one `expired` event, then 77")
    func sessionEndsWithTheAccessToken() async throws {
        let fixture = try await signedInWithoutRefreshToken()
        fixture.clock.advance(seconds: 299)
        #expect(try fixture.controller.endSessionIfOver().events.isEmpty)
        #expect(try fixture.controller.status().isSignedIn)
        fixture.clock.advance(seconds: 1)
        #expect(try fixture.controller.status().isSignedIn == false)
        await #expect { try await fixture.controller.accessToken() } throws: { ($0 as? AuthError)?.exitCode == 77 }
        #expect(fixture.trail == ["signed-in alice@example.org sign-in", "signed-out alice@example.org expired"])
        #expect(try fixture.keyring.value(TokenSet.self, service: fixture.service, account: fixture.alice, server: fixture.binding.server) == nil)
        #expect(fixture.refreshes == 0)
    }

    @Test("no refresh token: the end found without a command (as serve finds it) is one `expired` event")
    func endFoundWithoutCommand() async throws {
        let fixture = try await signedInWithoutRefreshToken()
        fixture.clock.advance(seconds: 300)
        let ended = try fixture.controller.endSessionIfOver()
        #expect(ended.events.map(\.reason) == [.expired])
        #expect(try fixture.controller.endSessionIfOver().events.isEmpty)
        #expect(fixture.trail == ["signed-in alice@example.org sign-in", "signed-out alice@example.org expired"])
    }

    @Test("a refresh answer without a new refresh token keeps the old one: the session stays renewable")
    func refreshWithoutRotationStaysRenewable() async throws {
        let fixture = try BoundFixture()
        try await fixture.signIn()
        fixture.server.configure { $0.issuesRefreshTokens = false }
        _ = try await fixture.controller.accessToken(forceRefresh: true)
        fixture.clock.advance(seconds: 280)
        _ = try await fixture.controller.accessToken()
        #expect(fixture.refreshes == 2)
        fixture.clock.advance(seconds: 300)  // the access token expired; the refresh token lives
        #expect(try fixture.controller.status().isSignedIn)
    }

    @Test("no refresh token: the settings file says so (renewable=false); a file without the key is renewable; another value is corrupt")
    func settingsKeepRenewable() throws {
        let folder = SettingsFolder()
        let binding = ServerBinding(server: try ServerURL(validating: "https://auth.example.org/token"))
        let times = TokenTimes(accessExpiresAt: 1_795_000_060_000_000, accessLifetime: 60, renewable: false)
        let record = SessionRecord(user: AccountID(rawValue: "alice"), name: "A", signedInAt: "2026-11-22T01:00:00Z", sequence: 1,
                                   binding: binding, tokenTimes: times)
        _ = try folder.store.save(record, service: folder.service)
        #expect(try folder.store.read(service: folder.service).record == record)
        #expect(try folder.contents().contains("renewable=false\n"))
        var renewable = record
        renewable.tokenTimes?.renewable = true
        _ = try folder.store.save(renewable, service: folder.service)
        #expect(try folder.store.read(service: folder.service).record == renewable)
        #expect(!(try folder.contents()).contains("renewable"))
        try folder.write("[svc]\nserver=https://h/\nuser=a\nrenewable=no\n")
        #expect(try folder.store.read(service: folder.service).corruption != nil)
    }

    // MARK: - Rebinding with kept tokens

    /// Alice's and bob's tokens kept at the fixture's server: bob switched in over alice, then
    /// signed out keeping his.
    func keptTokens() async throws -> BoundFixture {
        let fixture = try BoundFixture()
        try await fixture.signIn()
        try await fixture.signIn(fixture.bob, "pw2")
        try await fixture.controller.signOut(keepingCredentials: true)
        return fixture
    }

    let elsewhere = ServerBinding(server: try! ServerURL(validating: "https://elsewhere.test/token"))

    @Test("kept tokens: the server cannot be changed (65); the message names their accounts and says to forget them first")
    func changeRefusedWhileTokensAreKept() async throws {
        let fixture = try await keptTokens()
        let error = #expect(throws: AuthError.self) { try fixture.controller.setBinding(self.elsewhere) }
        #expect(error?.exitCode == 65)
        #expect(error?.message.contains("alice@example.org") == true)
        #expect(error?.message.contains("bob") == true)
        #expect(error?.hints == [.forgetFirst([fixture.alice, fixture.bob])])
        #expect(try fixture.controller.binding() == fixture.binding)
        #expect(try fixture.controller.accounts().map(\.id) == [fixture.alice, fixture.bob])
    }

    @Test("kept tokens: the binding cannot be removed (65)")
    func unsetRefusedWhileTokensAreKept() async throws {
        let fixture = try await keptTokens()
        #expect { try fixture.controller.setBinding(nil) } throws: { ($0 as? AuthError)?.exitCode == 65 }
        #expect(try fixture.controller.binding() == fixture.binding)
    }

    @Test("kept tokens: a sign-in with another server is refused (65) before the server is asked")
    func signInElsewhereRefusedWhileTokensAreKept() async throws {
        let fixture = try await keptTokens()
        let requests = fixture.server.requests.count
        await #expect {
            try await fixture.controller.signIn(account: fixture.bob, name: "", password: try Password("pw2"), binding: self.elsewhere)
        } throws: { ($0 as? AuthError)?.exitCode == 65 }
        #expect(try fixture.controller.binding() == fixture.binding)
        #expect(fixture.server.requests.count == requests)
        #expect(fixture.trail.count == 4)  // nothing after the sign-out
    }

    @Test("kept tokens: the same server (another client id) may be set; once they are forgotten, any server")
    func rebindingAfterForgetting() async throws {
        let fixture = try await keptTokens()
        var sameServer = fixture.binding
        sameServer.clientID = "other"
        try fixture.controller.setBinding(sameServer)
        #expect(try fixture.controller.accounts().map(\.id) == [fixture.alice, fixture.bob])
        try await fixture.controller.forget(fixture.alice)
        try await fixture.controller.forget(fixture.bob)
        try fixture.controller.setBinding(elsewhere)
        #expect(try fixture.controller.binding() == elsewhere)
    }
}
