// SPDX-License-Identifier: Apache-2.0
@testable import AuthControllerCore
import Foundation
import Testing

/// What `serve` decides to tell the person when a session ends, from its own events, signals
/// anyone may send, its re-reads and the notification server's word.
@Suite("serve's desktop notices: when a session ends, and only then")
struct SessionEndNoticesTests {
    private let service = ServiceName(rawValue: "io.example.cloud")!
    private let ada = AccountID(rawValue: "ada@example.org")!
    private let eve = AccountID(rawValue: "eve@example.org")!

    private func binding(_ tokenProtocol: ServerBinding.TokenProtocol = .oidc) -> ServerBinding {
        ServerBinding(server: try! ServerURL(validating: "https://id.example.org"), tokenProtocol: tokenProtocol)
    }

    private func signedIn(_ account: AccountID, sequence: UInt64, _ tokenProtocol: ServerBinding.TokenProtocol = .oidc) -> SessionRecord {
        SessionRecord(user: account, name: "", signedInAt: "2026-11-27T00:00:00Z", sequence: sequence, binding: binding(tokenProtocol))
    }

    private func signedOut(sequence: UInt64, because reason: LoginEvent.Reason, _ tokenProtocol: ServerBinding.TokenProtocol = .oidc) -> SessionRecord {
        SessionRecord(sequence: sequence, binding: binding(tokenProtocol), endedBecause: reason)
    }

    private func event(_ status: LoginEvent.Status, _ account: AccountID, _ reason: LoginEvent.Reason, _ sequence: UInt64) -> LoginEvent {
        LoginEvent(service: service, status: status, account: account, reason: reason, name: "", timestamp: Date(), sequence: sequence)
    }

    private func notice(_ account: AccountID, _ reason: LoginEvent.Reason, _ sequence: UInt64, offersSignIn: Bool = true) -> SessionEndNotices.Notice {
        SessionEndNotices.Notice(service: service, account: account, reason: reason, sequence: sequence, offersSignIn: offersSignIn)
    }

    @Test("an end serve found itself is told at once, once; sign-out, forget and switch are not")
    func ownEnds() {
        var notices = SessionEndNotices()
        _ = notices.reread([service: signedIn(ada, sequence: 3)])
        #expect(notices.ownEvent(event(.signedOut, ada, .expired, 4)) == [.post(notice(ada, .expired, 4))])
        #expect(notices.ownEvent(event(.signedOut, ada, .expired, 4)).isEmpty)
        for reason in [LoginEvent.Reason.signOut, .forget, .switch] {
            #expect(notices.ownEvent(event(.signedOut, ada, reason, 9)).isEmpty)
        }
    }

    @Test("another process's end is told once the re-read shows it; the signal alone posts nothing")
    func confirmedSignal() {
        var notices = SessionEndNotices()
        _ = notices.reread([service: signedIn(ada, sequence: 3)])
        notices.signal(event(.signedOut, ada, .removed, 4))
        #expect(notices.reread([service: signedIn(ada, sequence: 3)]).isEmpty)
        #expect(notices.reread([service: signedOut(sequence: 4, because: .removed)]) == [.post(notice(ada, .removed, 4))])
        notices.signal(event(.signedOut, ada, .removed, 4))
        #expect(notices.reread([service: signedOut(sequence: 4, because: .removed)]).isEmpty)
    }

    @Test("a signal arriving after the re-read that saw the end is still confirmed by the next")
    func lateSignal() {
        var notices = SessionEndNotices()
        _ = notices.reread([service: signedIn(ada, sequence: 3)])
        #expect(notices.reread([service: signedOut(sequence: 4, because: .expired)]).isEmpty)
        notices.signal(event(.signedOut, ada, .expired, 4))
        #expect(notices.reread([service: signedOut(sequence: 4, because: .expired)]) == [.post(notice(ada, .expired, 4))])
    }

    @Test("forged signals post nothing", arguments: [
        // Nobody the settings show as signed out with that sequence.
        (LoginEvent.Reason.expired, UInt64(5), "ada"),
        // An account serve never knew as signed in.
        (.expired, 4, "eve"),
        // A reason the settings contradict (the person signed out).
        (.removed, 4, "ada"),
    ])
    func forged(reason: LoginEvent.Reason, sequence: UInt64, account: String) {
        var notices = SessionEndNotices()
        _ = notices.reread([service: signedIn(ada, sequence: 3)])
        notices.signal(event(.signedOut, AccountID(rawValue: account + "@example.org")!, reason, sequence))
        #expect(notices.reread([service: signedOut(sequence: 4, because: .signOut)]).isEmpty)
        #expect(notices.reread([service: signedOut(sequence: 5, because: .signOut)]).isEmpty)
    }

    @Test("a local account signed out by the person: a forged removal with its sequence posts nothing")
    func localSignOut() {
        var notices = SessionEndNotices()
        _ = notices.reread([service: SessionRecord(user: ada, name: "", signedInAt: "2026-11-27T00:00:00Z", sequence: 3)])
        notices.signal(event(.signedOut, ada, .removed, 4))
        #expect(notices.reread([service: SessionRecord(sequence: 4, endedBecause: .signOut)]).isEmpty)
        notices.signal(event(.signedOut, ada, .removed, 5))
        #expect(notices.reread([service: SessionRecord(sequence: 5, endedBecause: .removed)]) == [.post(notice(ada, .removed, 5, offersSignIn: false))])
    }

    @Test("the sign-in is offered for OpenID providers only")
    func offersSignIn() {
        var notices = SessionEndNotices()
        _ = notices.reread([service: signedIn(ada, sequence: 3, .oauth2)])
        #expect(notices.ownEvent(event(.signedOut, ada, .expired, 4)) == [.post(notice(ada, .expired, 4, offersSignIn: false))])
    }

    @Test("a later sign-in closes the notice, at once or as soon as Notify answers")
    func signInCloses() {
        var notices = SessionEndNotices()
        _ = notices.reread([service: signedIn(ada, sequence: 3)])
        let told = notice(ada, .expired, 4)
        _ = notices.ownEvent(event(.signedOut, ada, .expired, 4))
        #expect(notices.posted(told, id: 17).isEmpty)
        #expect(notices.reread([service: signedIn(ada, sequence: 5)]) == [.close(id: 17)])
        #expect(notices.reread([service: signedIn(ada, sequence: 5)]).isEmpty)

        var pending = SessionEndNotices()
        _ = pending.reread([service: signedIn(ada, sequence: 3)])
        _ = pending.ownEvent(event(.signedOut, ada, .expired, 4))
        #expect(pending.reread([service: signedIn(ada, sequence: 5)]).isEmpty)
        #expect(pending.posted(told, id: 18) == [.close(id: 18)])
    }

    @Test("a notice the server reports closed is not closed again")
    func serverClosed() {
        var notices = SessionEndNotices()
        _ = notices.reread([service: signedIn(ada, sequence: 3)])
        _ = notices.ownEvent(event(.signedOut, ada, .expired, 4))
        _ = notices.posted(notice(ada, .expired, 4), id: 17)
        notices.closed(id: 17, sender: ":1.9", owner: ":1.5")
        notices.closed(id: 17, sender: ":1.5", owner: ":1.5")
        #expect(notices.reread([service: signedIn(ada, sequence: 5)]).isEmpty)
    }

    @Test("the action starts the sign-in once, only at the word of the server's owner, only for a notice of serve's")
    func action() {
        var notices = SessionEndNotices()
        _ = notices.reread([service: signedIn(ada, sequence: 3)])
        _ = notices.ownEvent(event(.signedOut, ada, .expired, 4))
        #expect(notices.actionInvoked(id: 17, action: "default", sender: ":1.5", owner: ":1.5").isEmpty)
        _ = notices.posted(notice(ada, .expired, 4), id: 17)
        #expect(notices.actionInvoked(id: 17, action: "default", sender: ":1.9", owner: ":1.5").isEmpty)
        #expect(notices.actionInvoked(id: 17, action: "default", sender: ":1.5", owner: nil).isEmpty)
        #expect(notices.actionInvoked(id: 18, action: "default", sender: ":1.5", owner: ":1.5").isEmpty)
        #expect(notices.actionInvoked(id: 17, action: "other", sender: ":1.5", owner: ":1.5").isEmpty)
        #expect(notices.actionInvoked(id: 17, action: "default", sender: ":1.5", owner: ":1.5") == [.signIn(service, ada)])
        #expect(notices.actionInvoked(id: 17, action: "default", sender: ":1.5", owner: ":1.5").isEmpty)
    }

    @Test("another notification server forgets the ids of the last; a failed Notify leaves nothing open")
    func serverChanges() {
        var notices = SessionEndNotices()
        _ = notices.reread([service: signedIn(ada, sequence: 3)])
        _ = notices.ownEvent(event(.signedOut, ada, .expired, 4))
        _ = notices.posted(notice(ada, .expired, 4), id: 17)
        notices.serverChanged()
        #expect(notices.actionInvoked(id: 17, action: "default", sender: ":1.6", owner: ":1.6").isEmpty)
        #expect(notices.reread([service: signedIn(ada, sequence: 5)]).isEmpty)
        _ = notices.ownEvent(event(.signedOut, ada, .expired, 6))
        notices.notPosted(notice(ada, .expired, 6))
        #expect(notices.reread([service: signedIn(ada, sequence: 7)]).isEmpty)
    }

    @Test("a flood of forged claims keeps a bounded number waiting")
    func flood() {
        var notices = SessionEndNotices()
        _ = notices.reread([service: signedIn(ada, sequence: 3)])
        for sequence in 100..<10_100 { notices.signal(event(.signedOut, ada, .expired, UInt64(sequence))) }
        #expect(notices.reread([service: signedOut(sequence: 10_099, because: .expired)]) == [.post(notice(ada, .expired, 10_099))])
    }
}
