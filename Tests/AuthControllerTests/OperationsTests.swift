// SPDX-License-Identifier: Apache-2.0
import AuthController
import AuthControllerTesting
import Foundation
import Synchronization
import TestSupport
import Testing

/// One meaning per operation: the `async` operations serve local and bound services alike, the
/// original synchronous API refuses what only they can do, and sign-in decides itself whether it
/// asks for a new password.
@Suite("AuthController operations")
struct OperationsTests {
    @Test("the original signOut() refuses a bound service, changing nothing; await signOut(keepingCredentials:) revokes")
    func originalSignOutOnBoundService() async throws {
        let fixture = try BoundFixture(revoke: true)
        try await fixture.signIn()
        let requests = fixture.server.requests.count
        #expect { try fixture.controller.signOut() } throws: { error in
            (error as? AuthError)?.exitCode == 69 && "\(error)".contains("signOut(keepingCredentials: false)")
        }
        #expect(try fixture.controller.status().isSignedIn)
        #expect(fixture.server.requests.count == requests)
        try await fixture.controller.signOut(keepingCredentials: false)
        #expect(fixture.server.requests.last?.endpoint == "revoke")
    }

    @Test("the original signIn(_:password:) refuses a bound service (69) and asks no server")
    func originalSignInOnBoundService() async throws {
        let fixture = try BoundFixture()
        try fixture.controller.setBinding(fixture.binding)
        #expect { try fixture.controller.signIn(User(name: "A", email: "alice@example.org"), password: "pw") } throws: { error in
            (error as? AuthError)?.exitCode == 69
        }
        #expect(fixture.server.requests.isEmpty)
    }

    @Test("forget of a bound account revokes its refresh token")
    func forgetRevokes() async throws {
        let fixture = try BoundFixture(revoke: true)
        try await fixture.signIn()
        let outcome = try await fixture.controller.forget(fixture.alice)
        #expect(outcome.events.map(\.reason) == [.forget])
        #expect(fixture.server.requests.last?.endpoint == "revoke")
    }

    @Test("sign-in asks its provider for a new password to enrol, and for the password of a known account")
    func passwordProviderLocal() async throws {
        let fixture = Fixture()
        let asked = Mutex<[AuthController.PasswordRequest]>([])
        let provider = { (request: AuthController.PasswordRequest) throws(AuthError) -> Password in
            asked.withLock { $0.append(request) }
            return try Password("pw")
        }
        try await fixture.controller.signIn(account: fixture.account("a"), name: "", password: provider)
        try await fixture.controller.signIn(account: fixture.account("a"), name: "", password: provider)
        #expect(asked.withLock { $0 } == [.init(account: fixture.account("a"), isNew: true),
                                          .init(account: fixture.account("a"), isNew: false)])
    }

    @Test("on a bound service the password is new only for a registration")
    func passwordProviderBound() async throws {
        let fixture = try BoundFixture(.json)
        let asked = Mutex<[Bool]>([])
        try await fixture.controller.signIn(account: AccountID(rawValue: "carol")!, name: "", register: true,
                                            binding: fixture.binding) { request throws(AuthError) in
            asked.withLock { $0.append(request.isNew) }
            return try Password("pw3")
        }
        try await fixture.controller.signIn(account: fixture.alice, name: "") { request throws(AuthError) in
            asked.withLock { $0.append(request.isNew) }
            return try Password("pw")
        }
        #expect(asked.withLock { $0 } == [true, false])
    }

    @Test("a provider that fails ends the sign-in and nothing changes; registering without a binding is refused before it is asked")
    func passwordProviderFails() async throws {
        let fixture = Fixture()
        await #expect(throws: AuthError.denied("no password")) {
            try await fixture.controller.signIn(account: fixture.account("a"), name: "") { _ throws(AuthError) in throw .denied("no password") }
        }
        #expect(fixture.broadcaster.events.isEmpty)
        #expect(try fixture.keyring.containsItem(service: fixture.service, account: fixture.account("a")) == false)
        await #expect { () async throws in
            try await fixture.controller.signIn(account: fixture.account("a"), name: "", register: true) { _ throws(AuthError) in
                Issue.record("the provider was asked")
                return try Password("pw")
            }
        } throws: { ($0 as? AuthError)?.exitCode == 64 }
    }

    @Test("the async operations call the keyring off the cooperative pool")
    func keyringOffThePool() async throws {
        let store = TaskNotingStore()
        let controller = AuthController(service: ServiceName(rawValue: "pool.service")!, keyring: store,
                                        settings: InMemorySettingsStore(),
                                        hasher: Argon2idHasher(parameters: .init(memoryKiB: 64, iterations: 2, parallelism: 1)),
                                        broadcaster: RecordingBroadcaster(), notificationCenter: NotificationCenter())
        let account = AccountID(rawValue: "a")!
        try await controller.signIn(account: account, name: "", password: Password("pw"))
        try await controller.verify(Password("pw"))
        try await controller.signOut(keepingCredentials: true)
        try await controller.forget(account)
        let calls = store.takeCalls()
        #expect(!calls.isEmpty)
        #expect(Set(calls) == [false])
    }

    @Test("a bound service's token and re-authentication call the keyring off the cooperative pool")
    func boundKeyringOffThePool() async throws {
        let store = TaskNotingStore()
        let fixture = try BoundFixture(keyringCalls: store)
        try await fixture.signIn()
        _ = try await fixture.controller.accessToken(forceRefresh: true)
        try await fixture.controller.verify(Password("pw"))
        try await fixture.controller.signOut(keepingCredentials: false)
        #expect(Set(store.takeCalls()) == [false])
    }
}
