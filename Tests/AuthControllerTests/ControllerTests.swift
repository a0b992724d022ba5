// SPDX-License-Identifier: Apache-2.0
import AuthController
import AuthControllerTesting
import Foundation
import Synchronization
import TestSupport
import Testing

@Suite("AuthController on in-memory stores")
struct ControllerTests {
    @Test("sign-in enrols, then verifies; status and currentUser follow")
    func enrolThenVerify() async throws {
        let fixture = Fixture()
        #expect(!fixture.controller.isSignedIn)
        try await fixture.signIn("alice@example.org", "pw1", name: "Alice")
        #expect(fixture.controller.isSignedIn)
        #expect(fixture.controller.currentUser == User(name: "Alice", email: "alice@example.org"))
        let status = try fixture.controller.status()
        #expect(status.signedInAt.map(Timestamp.rfc3339(_:)) == "2026-11-18T11:06:40Z")
        #expect(status.signedInAt == Timestamp.date(microseconds: 1_795_000_000_000_000))
        #expect(status.sequence == 1)
        try await fixture.controller.signOut(keepingCredentials: true)
        await #expect(throws: AuthError.denied("wrong password for alice@example.org")) { try await fixture.signIn("alice@example.org", "pw2") }
        try await fixture.signIn("alice@example.org", "pw1")
        #expect(fixture.trail == ["signed-in alice@example.org sign-in #1", "signed-out alice@example.org sign-out #2",
                                  "signed-in alice@example.org sign-in #3"])
    }

    @Test("the original API: signIn(_:password:) and signOut()")
    func originalAPI() throws {
        let fixture = Fixture()
        try fixture.controller.signIn(User(name: "Bob", email: "bob@example.org"), password: "secret")
        #expect(fixture.controller.currentUser?.email == "bob@example.org")
        try fixture.controller.signOut()
        #expect(fixture.controller.currentUser == nil)
        #expect(try fixture.keyring.containsItem(service: fixture.service, account: fixture.account("bob@example.org")) == false)
        #expect(throws: AuthError.self) { try fixture.controller.signIn(User(name: "", email: " bad"), password: "x") }
    }

    @Test("a switch is two events; signing in again as the same account is none")
    func switchAccounts() async throws {
        let fixture = Fixture()
        try await fixture.signIn("a", name: "A")
        try await fixture.signIn("b", name: "B")
        let again = try await fixture.signIn("b")
        #expect(again.events.isEmpty)
        #expect(fixture.trail == ["signed-in a sign-in #1", "signed-out a switch #2", "signed-in b switch #3 after a"])
        #expect(fixture.broadcaster.events[1].name == "A")
        #expect(fixture.broadcaster.events[2].name == "B")
        #expect(try fixture.controller.status().sequence == 3)
    }

    @Test("sign-out: one event; nobody signed in: none, with a note; sequence is kept")
    func signOut() async throws {
        let fixture = Fixture()
        let nobody = try await fixture.controller.signOut(keepingCredentials: false)
        #expect(nobody.events.isEmpty)
        #expect(nobody.warnings == ["nobody is signed in to test.service"])
        try await fixture.signIn("a")
        try await fixture.controller.signOut(keepingCredentials: false)
        #expect(try !fixture.keyring.containsItem(service: fixture.service, account: fixture.account("a")))
        #expect(fixture.trail == ["signed-in a sign-in #1", "signed-out a sign-out #2"])
        #expect(try fixture.controller.status().sequence == 2)
    }

    @Test("--keep-credentials keeps the hash")
    func keepCredentials() async throws {
        let fixture = Fixture()
        try await fixture.signIn("a")
        try await fixture.controller.signOut(keepingCredentials: true)
        #expect(try fixture.keyring.containsItem(service: fixture.service, account: fixture.account("a")))
    }

    @Test("forget: signed in → one event with reason forget; otherwise none; idempotent")
    func forget() async throws {
        let fixture = Fixture()
        try await fixture.signIn("a")
        try await fixture.signIn("b")
        let other = try await fixture.controller.forget(fixture.account("a"))
        #expect(other.events.isEmpty)
        try await fixture.controller.forget(fixture.account("b"))
        let twice = try await fixture.controller.forget(fixture.account("b"))
        #expect(twice.events.isEmpty)
        #expect(fixture.trail.suffix(1) == ["signed-out b forget #4"])
        #expect(try fixture.controller.accounts().isEmpty)
        #expect(!fixture.controller.isSignedIn)
    }

    @Test("stale state: the settings name a user whose item is gone → signed out; the next change ends it with one `removed` event")
    func staleState() async throws {
        let fixture = Fixture()
        try await fixture.signIn("a")
        try fixture.keyring.deleteItem(service: fixture.service, account: fixture.account("a"))
        #expect(try fixture.controller.status().isSignedIn == false)
        #expect(fixture.trail == ["signed-in a sign-in #1"])  // reading changes nothing
        let outcome = try await fixture.controller.signOut(keepingCredentials: false)
        #expect(outcome.events.map(\.reason) == [.removed])
        #expect(outcome.warnings == ["a was already signed out of test.service: its keyring item is gone"])
        #expect(try fixture.settings.read(service: fixture.service).record == SessionRecord(sequence: 2, endedBecause: .removed))
        #expect(fixture.trail == ["signed-in a sign-in #1", "signed-out a removed #2"])
        #expect(try await fixture.controller.signOut(keepingCredentials: false).events.isEmpty)
    }

    @Test("sign-in over stale state: `removed` for the old account, then a plain sign-in, not a switch", arguments: ["a", "b"])
    func signInOverStale(_ next: String) async throws {
        let fixture = Fixture()
        try await fixture.signIn("a")
        try fixture.keyring.deleteItem(service: fixture.service, account: fixture.account("a"))
        try await fixture.signIn(next)
        #expect(fixture.trail == ["signed-in a sign-in #1", "signed-out a removed #2", "signed-in \(next) sign-in #3"])
    }

    @Test("forget over stale state ends it with `removed`, once")
    func forgetOverStale() async throws {
        let fixture = Fixture()
        try await fixture.signIn("a")
        try fixture.keyring.deleteItem(service: fixture.service, account: fixture.account("a"))
        try await fixture.controller.forget(fixture.account("a"))
        try await fixture.controller.forget(fixture.account("a"))
        #expect(fixture.trail == ["signed-in a sign-in #1", "signed-out a removed #2"])
    }

    @Test("a change that would take the sequence to its limit is refused (78), and nothing is stored",
          arguments: [UInt64.max - 2, UInt64.max - 3])
    func sequenceAtItsLimit(_ sequence: UInt64) async throws {
        let fixture = Fixture()
        try await fixture.signIn("a")
        _ = try fixture.settings.save(SessionRecord(user: fixture.account("a"), name: "", signedInAt: "2026-11-18T11:06:40Z",
                                                sequence: sequence), service: fixture.service)
        // A switch is two events: from max − 2 the second would be numbered max.
        let overflows = sequence == UInt64.max - 2
        if overflows {
            await #expect { try await fixture.signIn("b") } throws: { ($0 as? AuthError)?.exitCode == 78 }
            #expect(try fixture.keyring.containsItem(service: fixture.service, account: fixture.account("b")) == false)
            #expect(fixture.trail == ["signed-in a sign-in #1"])
        } else {
            try await fixture.signIn("b")
            #expect(fixture.broadcaster.events.last?.sequence == UInt64.max - 1)
        }
    }

    @Test("a settings write that fails after enrolment removes the new hash and sends nothing")
    func rollbackNewHash() async throws {
        let fixture = Fixture()
        fixture.settings.failSaves(with: .settingsIO("disk full"))
        await #expect(throws: AuthError.settingsIO("disk full")) { try await fixture.signIn("a") }
        #expect(try fixture.keyring.containsItem(service: fixture.service, account: fixture.account("a")) == false)
        #expect(fixture.broadcaster.events.isEmpty)
    }

    @Test("a settings write that fails after sign-out restores the hash")
    func rollbackSignOut() async throws {
        let fixture = Fixture()
        try await fixture.signIn("a", "pw")
        fixture.settings.failSaves(with: .settingsIO("disk full"))
        await #expect(throws: AuthError.self) { try await fixture.controller.signOut(keepingCredentials: false) }
        await #expect(throws: AuthError.self) { try await fixture.controller.forget(fixture.account("a")) }
        fixture.settings.failSaves(with: nil)
        #expect(fixture.controller.currentUser?.email == "a")
        try await fixture.signIn("a", "pw")  // the hash is still the one that verifies
        #expect(fixture.broadcaster.events.count == 1)
    }

    @Test("wrong password: 77, nothing changes, no event")
    func wrongPassword() async throws {
        let fixture = Fixture()
        try await fixture.signIn("a", "right")
        try await fixture.signIn("b", "other")
        let before = try fixture.settings.read(service: fixture.service)
        await #expect(throws: AuthError.denied("wrong password for a")) { try await fixture.signIn("a", "wrong") }
        #expect(try fixture.settings.read(service: fixture.service) == before)
        #expect(fixture.broadcaster.events.count == 3)
    }

    @Test("a stored secret that is not an authctl hash: 65 naming the account and `forget`")
    func foreignSecret() async throws {
        let fixture = Fixture()
        try fixture.keyring.store("plain-text", service: fixture.service, account: fixture.account("a"), label: "x")
        await #expect {
            try await fixture.signIn("a")
        } throws: { error in
            (error as? AuthError)?.exitCode == 65 && "\(error)".contains("forgetting a")
                && (error as? AuthError)?.hints == [.forget(fixture.account("a"))]
        }
        #expect(fixture.broadcaster.events.isEmpty)
    }

    @Test("verify: match, mismatch (77), nobody (1), and upgrade of a weak hash")
    func verify() async throws {
        let fixture = Fixture()
        await #expect(throws: AuthError.notSignedIn("nobody is signed in to test.service")) { try await fixture.controller.verify(fixture.password("x")) }
        let weak = try Argon2idHasher(parameters: .init(memoryKiB: 32, iterations: 1, parallelism: 1)).hash(fixture.password("pw"))
        try fixture.keyring.store(weak, service: fixture.service, account: fixture.account("a"), label: "x")
        try await fixture.signIn("a", "pw")
        let upgraded = try #require(try fixture.keyring.secret(service: fixture.service, account: fixture.account("a")))
        #expect(upgraded.contains("m=64,t=2,p=1"))
        try await fixture.controller.verify(fixture.password("pw"))
        await #expect(throws: AuthError.denied("wrong password for a")) { try await fixture.controller.verify(fixture.password("nope")) }
    }

    @Test("an upgrade that cannot be stored is a warning, and the sign-in stands")
    func upgradeStoreFails() async throws {
        let fixture = Fixture()
        let weak = try Argon2idHasher(parameters: .init(memoryKiB: 32, iterations: 1, parallelism: 1)).hash(fixture.password("pw"))
        try fixture.keyring.store(weak, service: fixture.service, account: fixture.account("a"), label: "x")
        fixture.keyring.failStores(with: .unavailable("store refused"))
        let outcome = try await fixture.controller.signIn(account: fixture.account("a"), name: "", password: fixture.password("pw"))
        #expect(outcome.events.count == 1)
        try #require(outcome.warnings.count == 1)
        #expect(outcome.warnings[0].description.contains("stronger password hash"))
        #expect(try fixture.keyring.secret(service: fixture.service, account: fixture.account("a")) == weak)
    }

    @Test("a broadcast that fails is a warning; the change stands")
    func broadcastFails() async throws {
        let fixture = Fixture()
        fixture.broadcaster.failBroadcasts(with: .unavailable("listeners were not notified: bus gone"))
        let outcome = try await fixture.signIn("a")
        #expect(outcome.warnings == ["listeners were not notified: bus gone"])
        #expect(fixture.controller.isSignedIn)
    }

    @Test("corrupt settings: status refuses (78); sign-in replaces them; sign-out replaces them without deleting or an event")
    func corruptSettings() async throws {
        let fixture = Fixture()
        try await fixture.signIn("a")
        fixture.settings.makeCorrupt("the settings file is corrupt")
        #expect(throws: AuthError.settingsUnsafe("the settings file is corrupt")) { try fixture.controller.status() }
        await #expect(throws: AuthError.settingsUnsafe("the settings file is corrupt")) { try await fixture.controller.forget(fixture.account("a")) }
        #expect(throws: AuthError.settingsUnsafe("the settings file is corrupt")) { try fixture.controller.accounts() }
        let signOut = try await fixture.controller.signOut(keepingCredentials: false)
        #expect(signOut.events.isEmpty)
        try #require(signOut.warnings.count == 1)
        #expect(signOut.warnings[0].description.contains("no password hash was deleted"))
        #expect(try fixture.keyring.containsItem(service: fixture.service, account: fixture.account("a")))
        #expect(try fixture.controller.status().sequence == 0)
        fixture.settings.makeCorrupt("corrupt again")
        let signIn = try await fixture.signIn("a")
        #expect(signIn.warnings.contains { $0.description.contains("corrupt") })
        #expect(signIn.events.map(\.sequence) == [1])
    }

    @Test("accounts: sorted, current marked; a locked keyring is 69 for accounts but not for status")
    func accountsAndLocked() async throws {
        let fixture = Fixture()
        try await fixture.signIn("zed")
        try await fixture.signIn("amy")
        #expect(try fixture.controller.accounts() == [Account(id: fixture.account("amy"), isCurrent: true),
                                                      Account(id: fixture.account("zed"), isCurrent: false)])
        fixture.keyring.setLocked(true)
        #expect(throws: AuthError.self) { try fixture.controller.accounts() }
        let status = try fixture.controller.status()
        #expect(status.isSignedIn)
        #expect(status.keyringLocked)
    }

    @Test("services never see each other's accounts")
    func serviceIsolation() async throws {
        let fixture = Fixture()
        try await fixture.signIn("a")
        let other = AuthController(service: ServiceName(rawValue: "other")!, keyring: fixture.keyring, settings: fixture.settings,
                                   broadcaster: fixture.broadcaster)
        #expect(try other.accounts().isEmpty)
        #expect(!other.isSignedIn)
    }

    @Test("events are posted on the NotificationCenter and yielded to streams, in order")
    func inProcessEvents() async throws {
        let fixture = Fixture()
        let received = Mutex<[LoginEvent]>([])
        let token = fixture.center.addObserver(forName: .loginStatusChanged, object: nil, queue: nil) { note in
            if let event = note.userInfo?[LoginEvent.userInfoKey] as? LoginEvent { received.withLock { $0.append(event) } }
        }
        defer { fixture.center.removeObserver(token) }
        let stream = fixture.controller.events()
        try await fixture.signIn("a")
        try await fixture.signIn("b")
        try await fixture.controller.signOut(keepingCredentials: false)
        #expect(received.withLock { $0 } == fixture.broadcaster.events)
        var streamed: [LoginEvent] = []
        for await event in stream {
            streamed.append(event)
            if streamed.count == 4 { break }
        }
        #expect(streamed == fixture.broadcaster.events)
        #expect(streamed.map(\.sequence) == [1, 2, 3, 4])
    }

    @Test("the avatar URL is the Gravatar MD5 of the trimmed, lower-cased id")
    func avatar() throws {
        let status = LoginStatus(service: .standard, account: AccountID(rawValue: "MyEmailAddress@example.com")!, sequence: 1,
                                 keyringLocked: false)
        #expect(status.avatarURL == "https://www.gravatar.com/avatar/0bc83cb571cd1c50ba6f3e8a78ef1346")
        #expect(LoginStatus(service: .standard, sequence: 0, keyringLocked: false).avatarURL == nil)
    }
}
