import AuthController
@testable import AuthControllerCore
import AuthControllerTesting
import Foundation
import Testing

/// Bound services at the edges of the token's life: a server that issues no refresh token.
@Suite("Bound services: no refresh token")
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
        #expect(token.warnings.first?.contains("cannot be renewed") == true)
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
}
