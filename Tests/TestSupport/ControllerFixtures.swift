// SPDX-License-Identifier: Apache-2.0
public import AuthController
public import AuthControllerTesting
public import Foundation
import Synchronization

// Controllers on the in-memory stores of AuthControllerTesting, shared by the unit test files
// (several files each drive the same set-up).

/// The controller on in-memory stores: no bus, no keyring, no disk.
public final class Fixture: Sendable {
    public let keyring = InMemorySecretStore()
    public let settings = InMemorySettingsStore()
    public let broadcaster = RecordingBroadcaster()
    public let center = NotificationCenter()
    public let controller: AuthController
    public let service = ServiceName(rawValue: "test.service")!

    public init() {
        controller = AuthController(service: service, keyring: keyring, settings: settings,
                                    hasher: Argon2idHasher(parameters: .init(memoryKiB: 64, iterations: 2, parallelism: 1)),
                                    broadcaster: broadcaster, notificationCenter: center, clock: { Timestamp.date(microseconds: 1_795_000_000_123_456) })
    }

    public func account(_ text: String) -> AccountID { AccountID(rawValue: text)! }
    public func password(_ text: String) -> Password { try! Password(text) }

    @discardableResult
    public func signIn(_ account: String, _ password: String = "pw", name: String = "") async throws -> ChangeOutcome {
        try await controller.signIn(account: self.account(account), name: name, password: self.password(password))
    }

    /// (status, user, reason, sequence, previous-user) of every broadcast so far.
    public var trail: [String] {
        broadcaster.events.map { event in
            "\(event.status.rawValue) \(event.account?.rawValue ?? "-") \(event.reason.rawValue) #\(event.sequence)"
                + (event.previousAccount.map { " after \($0)" } ?? "")
        }
    }
}

/// A clock the test moves by hand.
public final class TestClock: Sendable {
    private let now = Mutex<UInt64>(1_795_000_000_000_000)
    public var read: @Sendable () -> UInt64 { { [self] in now.withLock { $0 } } }
    /// The clock as a controller and a token server take it.
    public var date: @Sendable () -> Date { { [self] in Timestamp.date(microseconds: now.withLock { $0 }) } }
    public func advance(seconds: Double) { now.withLock { $0 += UInt64(seconds * 1_000_000) } }
}

/// A controller of a service bound to an in-memory token server.
public final class BoundFixture: Sendable {
    public let clock = TestClock()
    public let server: InMemoryTokenServer
    public let keyring: InMemorySecretStore
    public let settings = InMemorySettingsStore()
    public let broadcaster = RecordingBroadcaster()
    public let controller: AuthController
    public let service = ServiceName(rawValue: "bound.service")!
    public let alice = AccountID(rawValue: "alice@example.org")!
    public let bob = AccountID(rawValue: "bob")!
    public let binding: ServerBinding

    /// - Parameter keyringCalls: a store the controller calls instead, which notes whether each
    ///   call runs inside a task before it passes it on to ``keyring``.
    public init(_ tokenProtocol: ServerBinding.TokenProtocol = .oauth2, revoke: Bool = false, keyringCalls: TaskNotingStore? = nil) throws {
        keyring = keyringCalls?.base ?? InMemorySecretStore()
        server = InMemoryTokenServer(clock: clock.date)
        server.configure { $0.accounts = ["alice@example.org": "pw", "bob": "pw2"] }
        binding = ServerBinding(server: try ServerURL(validating: tokenProtocol == .oauth2 ? "https://auth.test/token" : "https://api.test/v1"),
                                tokenProtocol: tokenProtocol, clientID: "cli",
                                revokeURL: revoke ? try ServerURL(validating: "https://auth.test/revoke") : nil)
        controller = AuthController(service: service, keyring: keyringCalls ?? keyring, settings: settings, broadcaster: broadcaster,
                                    notificationCenter: NotificationCenter(), tokenTransport: server, serverTimeout: .seconds(2), clock: clock.date)
    }

    @discardableResult
    public func signIn(_ account: AccountID? = nil, _ password: String = "pw") async throws -> ChangeOutcome {
        try await controller.signIn(account: account ?? alice, name: "A", password: Password(password), binding: binding)
    }

    public var trail: [String] { broadcaster.events.map { "\($0.status.rawValue) \($0.account?.rawValue ?? "-") \($0.reason.rawValue)" } }
    public var refreshes: Int { server.refreshCount }
}

/// A store that notes whether each call runs inside a task — on a thread of the cooperative pool —
/// and otherwise is the in-memory one.
public final class TaskNotingStore: SecretStore {
    public let base: InMemorySecretStore
    private let calls = Mutex<[Bool]>([])

    public init(base: InMemorySecretStore = InMemorySecretStore()) {
        self.base = base
    }

    /// For each call so far, whether it ran inside a task; emptied.
    public func takeCalls() -> [Bool] { calls.withLock { calls in defer { calls = [] }; return calls } }

    private func note() {
        let inTask = withUnsafeCurrentTask { $0 != nil }
        calls.withLock { $0.append(inTask) }
    }

    public func containsItem(_ key: ItemKey) throws(AuthError) -> Bool { note(); return try base.containsItem(key) }
    public func isLocked() throws(AuthError) -> Bool { note(); return try base.isLocked() }
    public func unlock() throws(AuthError) { note(); try base.unlock() }
    public func secret(_ key: ItemKey) throws(AuthError) -> [UInt8]? { note(); return try base.secret(key) }
    public func store(_ secret: [UInt8], contentType: String, for key: ItemKey, label: String) throws(AuthError) {
        note()
        try base.store(secret, contentType: contentType, for: key, label: label)
    }
    public func deleteItem(_ key: ItemKey) throws(AuthError) -> Bool { note(); return try base.deleteItem(key) }
    public func accounts(service: ServiceName, server: ServerURL?) throws(AuthError) -> [AccountID] {
        note()
        return try base.accounts(service: service, server: server)
    }
    public func awsRoles(service: ServiceName, account: AccountID) throws(AuthError) -> [String] {
        note()
        return try base.awsRoles(service: service, account: account)
    }
}
