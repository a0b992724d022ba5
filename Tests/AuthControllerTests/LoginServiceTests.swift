// SPDX-License-Identifier: Apache-2.0
import AuthController
@testable import AuthControllerCore
import AuthControllerTesting
import TestSupport
import Testing

@Suite("serve: object paths, schedules, status fields, errors")
struct LoginServiceTests {
    @Test("a service's object path writes each byte outside [A-Za-z0-9] as _ and two lower-case hex digits",
          arguments: [("io.github.authctl", "io_2egithub_2eauthctl"), ("a-b_c", "a_2db_5fc"), ("Corp9", "Corp9"), ("x.Y-", "x_2eY_2d")])
    func objectPath(service: String, escaped: String) throws {
        #expect(LoginService.objectPath(of: try ServiceName(validating: service)) == "/io/github/authctl/AuthController1/services/" + escaped)
    }

    @Test("a signed-in bound service is refreshed at 80% of the access lifetime and ends at the refresh token's expiry")
    func schedule() async throws {
        let fixture = try BoundFixture()
        _ = try await fixture.signIn()
        let status = try fixture.controller.status()
        let schedule = Schedule(status, try fixture.controller.intactRecord())
        let accessExpiry = Timestamp.microseconds(try #require(status.accessTokenExpiresAt))
        #expect(schedule.refreshAt == accessExpiry - 60_000_000)  // 20% of 300 s before the expiry
        #expect(schedule.endsAt == status.refreshTokenExpiresAt.map(Timestamp.microseconds(_:)))
        #expect(schedule.minValid == 300)
        #expect(schedule.next == schedule.refreshAt)
        // At that moment `token` with that threshold refreshes: the token is due.
        fixture.clock.advance(seconds: 241)
        let requests = fixture.refreshes
        _ = try await fixture.controller.accessToken(minValid: .seconds(schedule.minValid))
        #expect(fixture.refreshes == requests + 1)
    }

    @Test("nothing is scheduled for a signed-out or local service")
    func nothingScheduled() async throws {
        let fixture = try BoundFixture()
        #expect(Schedule(try fixture.controller.status(), try fixture.controller.intactRecord()).next == nil)
        _ = try await fixture.signIn()
        _ = try await fixture.controller.signOut(keepingCredentials: false)
        #expect(Schedule(try fixture.controller.status(), try fixture.controller.intactRecord()).next == nil)
    }

    @Test("GetStatus has the fields of status --json, times in µs, null fields left out")
    func statusFields() async throws {
        let fixture = try BoundFixture()
        let signedOut = LoginService.statusFields(try fixture.controller.status()).map(\.0)
        #expect(signedOut == ["service", "signedIn", "sequence", "keyringLocked"])
        _ = try await fixture.signIn()
        let fields = Dictionary(uniqueKeysWithValues: LoginService.statusFields(try fixture.controller.status()))
        #expect(fields["signedIn"] == .boolean(true))
        #expect(fields["user"] == .string("alice@example.org"))
        #expect(fields["name"] == .string("A"))
        #expect(fields["server"] == .string("https://auth.test/token"))
        #expect(fields["sequence"] == .uint64(1))
        #expect(fields["accessTokenExpiresAt"] == .uint64(fixture.clock.read() + 300_000_000))
        // signed-in-at is stored to the second.
        #expect(fields["signedInAt"] == .uint64(fixture.clock.read() / 1_000_000 * 1_000_000))
        if case .string(let avatar)? = fields["avatarURL"] { #expect(avatar.hasPrefix("https://www.gravatar.com/avatar/")) } else { Issue.record("no avatarURL") }
    }

    @Test("GetStatus's fields are the status document's, in its order, absent ones left out")
    func statusFieldsFollowTheDocument() async throws {
        let fixture = try BoundFixture()
        _ = try await fixture.signIn()
        let status = try fixture.controller.status()
        let present = status.documentFields.filter { $0.value != .absent }.map(\.name)
        #expect(LoginService.statusFields(status).map(\.0) == present)
    }

    @Test("each exit-code family has its D-Bus error",
          arguments: [(AuthError.notSignedIn("x"), "NotSignedIn"), (.usage("x"), "InvalidInput"), (.invalidInput("x"), "InvalidInput"),
                      (.unavailable("x"), "Unavailable"), (.settingsIO("x"), "SettingsIO"), (.temporaryFailure("x"), "Timeout"),
                      (.protocolError("x"), "Protocol"), (.denied("x"), "Denied"), (.settingsUnsafe("x"), "SettingsUnsafe")])
    func errorNames(error: AuthError, name: String) {
        #expect(error.dbusErrorName == "io.github.authctl.Error." + name)
    }
}

@Suite("Ending a session that is over")
struct EndSessionTests {
    @Test("nothing to end: no event, nothing written")
    func nothing() async throws {
        let fixture = try BoundFixture()
        _ = try await fixture.signIn()
        let saves = fixture.settings.saveCount
        #expect(try fixture.controller.endSessionIfOver().events.isEmpty)
        #expect(fixture.settings.saveCount == saves)
        #expect(fixture.trail == ["signed-in alice@example.org sign-in"])
    }

    @Test("a refresh token past its expiry: one expired event, the tokens deleted, without asking the server")
    func expired() async throws {
        let fixture = try BoundFixture()
        _ = try await fixture.signIn()
        fixture.clock.advance(seconds: 3_601)
        let requests = fixture.server.requests.count
        #expect(try fixture.controller.endSessionIfOver().events.map(\.reason) == [.expired])
        #expect(fixture.server.requests.count == requests)
        #expect(try fixture.keyring.containsItem(ItemKey(service: fixture.service, account: fixture.alice, server: fixture.binding.server)) == false)
        #expect(try fixture.controller.status().account == nil)
        #expect(fixture.trail.last == "signed-out alice@example.org expired")
        #expect(try fixture.controller.endSessionIfOver().events.isEmpty)  // once
    }

    @Test("an item removed behind authctl's back: one removed event")
    func removed() async throws {
        let fixture = try BoundFixture()
        _ = try await fixture.signIn()
        _ = try fixture.keyring.deleteItem(ItemKey(service: fixture.service, account: fixture.alice, server: fixture.binding.server))
        #expect(try fixture.controller.endSessionIfOver().events.map(\.reason) == [.removed])
        #expect(fixture.trail.last == "signed-out alice@example.org removed")
        #expect(try fixture.controller.binding() == fixture.binding)  // the binding stays
    }
}

@Suite("serve: the work stopping waits for")
struct InFlightTests {
    @Test("the wait for the changes under way ends when the last one ends")
    func drainedWhenTheLastChangeEnds() async {
        let calls = InFlight()
        let ticket = calls.begin(.change)
        async let drained: Void = calls.drained(within: .seconds(600))
        calls.end(ticket)
        let started = ContinuousClock.now
        await drained
        #expect(ContinuousClock.now - started < .seconds(60))
    }

    @Test("the wait ends at its limit when a change does not")
    func drainedAtTheLimit() async {
        let calls = InFlight()
        _ = calls.begin(.change)
        await calls.drained(within: .milliseconds(50))
        #expect(calls.count == 1)
    }

    @Test("a wait that includes reads ends when the last read ends")
    func drainedIncludingReads() async {
        let calls = InFlight()
        let ticket = calls.begin(.read)
        async let drained: Void = calls.drained(within: .seconds(600), includingReads: true)
        calls.end(ticket)
        let started = ContinuousClock.now
        await drained
        #expect(ContinuousClock.now - started < .seconds(60))
    }

    @Test("reads are not waited for: stopping takes them, to answer them with an error")
    func readsAreTaken() async {
        let calls = InFlight()
        _ = calls.begin(.read)
        let started = ContinuousClock.now
        await calls.drained(within: .seconds(600))
        #expect(ContinuousClock.now - started < .seconds(60))
        _ = calls.takeReads()
        #expect(calls.count == 0)
    }
}

@Suite("serve: the states GetStatus may answer from")
struct KnownStatesTests {
    let service = ServiceName(rawValue: "io.example.app")!

    func entry(_ record: SessionRecord = SessionRecord(), endsAt: UInt64? = nil) -> KnownStates.Entry {
        KnownStates.Entry(status: LoginStatus(service: service, sequence: record.sequence, keyringLocked: false), record: record, endsAt: endsAt)
    }

    @Test("a state read since the last change is used for the record it was made from")
    func used() {
        let states = KnownStates()
        states.store([service: entry()], readAt: states.generation)
        #expect(states.status(of: service, record: SessionRecord(), now: 0) != nil)
    }

    @Test("not for another record (a change that sent no event)")
    func otherRecord() {
        let states = KnownStates()
        states.store([service: entry()], readAt: states.generation)
        var record = SessionRecord()
        record.sequence = 1
        #expect(states.status(of: service, record: record, now: 0) == nil)
    }

    @Test("forgotten at a change")
    func forgotten() {
        let states = KnownStates()
        states.store([service: entry()], readAt: states.generation)
        states.forget()
        #expect(states.status(of: service, record: SessionRecord(), now: 0) == nil)
    }

    @Test("a re-read that began before a change stores nothing")
    func staleReread() {
        let states = KnownStates()
        let generation = states.generation
        states.forget()
        states.store([service: entry()], readAt: generation)
        #expect(states.status(of: service, record: SessionRecord(), now: 0) == nil)
    }

    @Test("not used once the session has ended by itself")
    func pastTheEnd() {
        let states = KnownStates()
        states.store([service: entry(endsAt: 10)], readAt: states.generation)
        #expect(states.status(of: service, record: SessionRecord(), now: 10) == nil)
    }
}
