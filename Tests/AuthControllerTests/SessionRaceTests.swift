// SPDX-License-Identifier: Apache-2.0
import AuthController
import AuthControllerTesting
import Foundation
import Synchronization
import TestSupport
import Testing

/// A keyring that plays another process at the worst moment: the first time the signed-in
/// account's tokens are read, that process signs out (the record cleared, the item deleted)
/// and the read finds nothing; with `signedOutAndInAgain` the same account signs in again
/// with new tokens right after that read. Without a race it only counts the token reads, so a
/// test knows when a `token` has read its session.
final class RacingStore: SecretStore {
    enum Race: Sendable {
        case signedOut
        case signedOutAndInAgain(TokenSet)
    }

    let base: InMemorySecretStore
    private let settings: InMemorySettingsStore
    private let race: Mutex<Race?>
    private let reads = Mutex(0)

    init(base: InMemorySecretStore, settings: InMemorySettingsStore, race: Race?) {
        self.base = base
        self.settings = settings
        self.race = Mutex(race)
    }

    /// How many times a token item was read.
    var tokenReads: Int { reads.withLock { $0 } }

    /// Runs the race once, at the first read of a token item; returns whether it ran.
    private func raceOnce(_ key: ItemKey) throws(AuthError) -> Bool {
        guard key.server != nil, let race = race.withLock({ (race) -> Race? in defer { race = nil }; return race }) else { return false }
        try settings.withExclusiveLock { () throws(AuthError) in
            let record = try settings.read(service: key.service).record
            _ = try base.deleteItem(key)
            var after = record.signedOut(sequence: record.sequence + 1)
            if case .signedOutAndInAgain(let tokens) = race {
                try base.store(tokens, service: key.service, account: key.account, server: key.server, label: "tokens")
                after = record
                after.sequence += 2
            }
            _ = try settings.save(after, service: key.service)
        }
        return true
    }

    func containsItem(_ key: ItemKey) throws(AuthError) -> Bool { try base.containsItem(key) }
    func isLocked() throws(AuthError) -> Bool { try base.isLocked() }
    func unlock() throws(AuthError) { try base.unlock() }
    func secret(_ key: ItemKey) throws(AuthError) -> [UInt8]? {
        if key.server != nil { reads.withLock { $0 += 1 } }
        // The read fell between the other process's sign-out and anything after it.
        if try raceOnce(key) { return nil }
        return try base.secret(key)
    }
    func store(_ secret: [UInt8], contentType: String, for key: ItemKey, label: String) throws(AuthError) {
        try base.store(secret, contentType: contentType, for: key, label: label)
    }
    func deleteItem(_ key: ItemKey) throws(AuthError) -> Bool { try base.deleteItem(key) }
    func accounts(service: ServiceName, server: ServerURL?) throws(AuthError) -> [AccountID] {
        try base.accounts(service: service, server: server)
    }
    func awsRoles(service: ServiceName, account: AccountID) throws(AuthError) -> [String] { try base.awsRoles(service: service, account: account) }
}

/// `token` racing another process's sign-out: an item deleted between finding the session and
/// reading its tokens is "not there" — nobody signed in (1) — never the end of a session the
/// server refused (77), and a session signed in again meanwhile is the one used.
@Suite("Sessions ended by another process mid-read")
struct SessionRaceTests {
    /// Alice signed in, and a controller that reads through a ``RacingStore`` running `race`.
    static func racing(_ race: RacingStore.Race?) async throws -> (BoundFixture, RacingStore, AuthController) {
        let fixture = try BoundFixture()
        try await fixture.signIn()
        let store = RacingStore(base: fixture.keyring, settings: fixture.settings, race: race)
        let controller = AuthController(service: fixture.service, keyring: store, settings: fixture.settings,
                                         broadcaster: fixture.broadcaster, notificationCenter: NotificationCenter(),
                                         tokenTransport: fixture.server, serverTimeout: .seconds(2), clock: fixture.clock.date)
        return (fixture, store, controller)
    }

    func racing(_ race: RacingStore.Race) async throws -> (BoundFixture, AuthController) {
        let (fixture, _, controller) = try await Self.racing(race)
        return (fixture, controller)
    }

    @Test("signed out between the settings read and the token read: exit 1, nobody is signed in")
    func signedOutMidRead() async throws {
        let (_, controller) = try await racing(.signedOut)
        await #expect { try await controller.accessToken() } throws: { ($0 as? AuthError)?.exitCode == 1 }
    }

    @Test("signed out mid-read: the message says nobody is signed in")
    func signedOutMidReadMessage() async throws {
        let (_, controller) = try await racing(.signedOut)
        await #expect { try await controller.accessToken() } throws: { ($0 as? AuthError)?.message.contains("nobody is signed in") == true }
    }

    @Test("signed out mid-read: no event of this process; the sign-out was the other one's")
    func signedOutMidReadNoEvent() async throws {
        let (fixture, controller) = try await racing(.signedOut)
        _ = try? await controller.accessToken()
        #expect(fixture.trail == ["signed-in alice@example.org sign-in"])
    }

    @Test("signed out and in again mid-read: the new session's token, and its session stays")
    func signedInAgainMidRead() async throws {
        let fresh = TokenSet(accessToken: "access-of-the-new-session", refreshToken: "refresh-of-the-new-session")
        let (fixture, controller) = try await racing(.signedOutAndInAgain(fresh))
        let token = try await controller.accessToken()
        #expect(token.token == fresh.accessToken)
        #expect(try controller.status().isSignedIn)
        #expect(!fixture.trail.contains { $0.hasSuffix("removed") })
    }
}

/// A refresh that waited for the refresh lock while another process ended the session: the
/// server's end of it is 77 for the waiter too; a sign-out or `forget` is nobody signed in (1).
@Suite("Refreshes that waited while the session ended")
struct WaitingRefreshTests {
    /// Another process holds the refresh lock, and ends alice's session (as `reason` does) once
    /// this one's forced refresh has read the session and waits; returns what the refresh threw.
    func refreshWaitingThroughAnEnd(_ reason: LoginEvent.Reason) async throws -> AuthError? {
        let (fixture, store, controller) = try await SessionRaceTests.racing(nil)
        let holding = Mutex(false)
        let other = Task { () async throws in
            try await fixture.settings.withRefreshLock(service: fixture.service, timeout: .seconds(10)) { () async throws(AuthError) in
                holding.withLock { $0 = true }
                _ = await eventually(within: .seconds(10), pollingEvery: .milliseconds(5)) { store.tokenReads > 0 }
                try fixture.settings.withExclusiveLock { () throws(AuthError) in
                    let record = try fixture.settings.read(service: fixture.service).record
                    _ = try fixture.keyring.deleteItem(ItemKey(service: fixture.service, account: fixture.alice, server: fixture.binding.server))
                    _ = try fixture.settings.save(record.signedOut(sequence: record.sequence + 1, because: reason), service: fixture.service)
                }
            }
        }
        _ = await eventually(within: .seconds(10), pollingEvery: .milliseconds(5)) { holding.withLock { $0 } }
        defer { other.cancel() }
        do {
            _ = try await controller.accessToken(forceRefresh: true)
            return nil
        } catch {
            try await other.value
            return error
        }
    }

    @Test("signed out while the refresh waited: 1, nobody is signed in", arguments: [LoginEvent.Reason.signOut, .forget])
    func signedOutWhileWaiting(_ reason: LoginEvent.Reason) async throws {
        let error = try await refreshWaitingThroughAnEnd(reason)
        #expect(error?.exitCode == 1, "\(String(describing: error))")
    }

    @Test("ended by the server while the refresh waited: 77, sign in again")
    func endedByTheServerWhileWaiting() async throws {
        let error = try await refreshWaitingThroughAnEnd(.expired)
        #expect(error?.exitCode == 77, "\(String(describing: error))")
    }
}
