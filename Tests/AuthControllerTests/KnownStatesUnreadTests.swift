// SPDX-License-Identifier: Apache-2.0
@testable import AuthControllerCore
import Testing

/// A re-read whose keyring did not answer learnt nothing new: what `GetStatus` knew of the
/// services it could not read stays in use until something may have changed it.
@Suite("serve: known states a re-read could not read")
struct KnownStatesUnreadTests {
    let service = ServiceName(rawValue: "io.example.app")!
    let other = ServiceName(rawValue: "io.example.other")!

    func entry(_ service: ServiceName) -> KnownStates.Entry {
        KnownStates.Entry(status: LoginStatus(service: service, sequence: 0, keyringLocked: false), record: SessionRecord(), endsAt: nil)
    }

    @Test("a service the re-read could not read keeps its state; one it read and found nothing for does not")
    func unreadKeepsItsState() {
        let states = KnownStates()
        states.store([service: entry(service), other: entry(other)], readAt: states.generation)
        states.store([:], keeping: [service], readAt: states.generation)
        #expect(states.status(of: service, record: SessionRecord(), now: 0) != nil)
        #expect(states.status(of: other, record: SessionRecord(), now: 0) == nil)
    }

    @Test("a state forgotten since is not kept")
    func forgottenIsNotKept() {
        let states = KnownStates()
        states.store([service: entry(service)], readAt: states.generation)
        let generation = states.generation
        states.forget(service)
        states.store([:], keeping: [service], readAt: generation)
        #expect(states.status(of: service, record: SessionRecord(), now: 0) == nil)
    }
}
