import AuthController
import AuthControllerTesting
import Testing

/// The contract every ``SecretStore`` keeps, run against the real Secret Service store (on a
/// private gnome-keyring) and against its in-memory twin, so that tests written on the twin
/// hold for the real thing.
@Suite("SecretStore contract: real and in-memory")
struct SecretStoreContractTests {
    enum Kind: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case secretService = "Secret Service", inMemory = "in-memory"
        var testDescription: String { rawValue }
    }

    /// A fresh store of `kind`, and how to lock it. The real one gets a keyring of its own,
    /// since locking the shared one would disturb other tests.
    struct Subject {
        let store: any SecretStore
        let lock: () throws -> Void
        let sandbox: DesktopSandbox?

        init(_ kind: Kind, promptAllowed: Bool = false) throws {
            switch kind {
            case .secretService:
                let sandbox = try DesktopSandbox()
                self.sandbox = sandbox
                store = SecretServiceStore(promptAllowed: promptAllowed, busAddress: sandbox.busAddress)
                lock = { try Scenario(sandbox: sandbox).lockKeyring() }
            case .inMemory:
                let twin = InMemorySecretStore(promptAllowed: promptAllowed, promptAnswer: .dismiss)
                sandbox = nil
                store = twin
                lock = { twin.setLocked(true) }
            }
        }

        func stop() { sandbox?.stop() }
    }

    let service = ServiceName(rawValue: "contract.service")!
    let other = ServiceName(rawValue: "contract.other")!
    let alice = AccountID(rawValue: "alice@example.org")!
    let bob = AccountID(rawValue: "bob")!

    @Test("store, read, replace in place, list, delete; services and accounts never collide", arguments: Kind.allCases)
    func roundTrip(_ kind: Kind) throws {
        let subject = try Subject(kind)
        defer { subject.stop() }
        let store = subject.store
        #expect(try store.secret(service: service, account: alice) == nil)
        #expect(try store.containsItem(service: service, account: alice) == false)
        try store.store("one", service: service, account: alice, label: "a")
        try store.store("two", service: service, account: alice, label: "a")
        try store.store("bob's", service: service, account: bob, label: "b")
        try store.store("elsewhere", service: other, account: alice, label: "c")
        #expect(try store.secret(service: service, account: alice) == "two")
        #expect(try store.secret(service: other, account: alice) == "elsewhere")
        #expect(try store.accounts(service: service).sorted() == [alice, bob].sorted())
        #expect(try store.deleteItem(service: service, account: alice))
        #expect(try store.deleteItem(service: service, account: alice) == false)
        #expect(try store.containsItem(service: service, account: alice) == false)
        #expect(try store.secret(service: other, account: alice) == "elsewhere")
        #expect(try store.accounts(service: service) == [bob])
    }

    @Test("locked, no prompt: existence and lock state still read; secrets, writes and listing are 69 \"locked\"", arguments: Kind.allCases)
    func lockedWithoutPrompt(_ kind: Kind) throws {
        let subject = try Subject(kind)
        defer { subject.stop() }
        let store = subject.store
        try store.store("x", service: service, account: alice, label: "a")
        try subject.lock()
        #expect(try store.isLocked())
        #expect(try store.containsItem(service: service, account: alice))
        #expect(try store.containsItem(service: service, account: bob) == false)
        #expect(throws: AuthError.keyringLocked) { try store.secret(service: service, account: alice) }
        #expect(throws: AuthError.keyringLocked) { try store.store("y", service: service, account: bob, label: "b") }
        #expect(throws: AuthError.keyringLocked) { try store.deleteItem(service: service, account: alice) }
        #expect(throws: AuthError.keyringLocked) { try store.unlock() }
        #expect(throws: AuthError.keyringLockedForListing) { try store.accounts(service: service) }
        #expect(try store.deleteItem(service: service, account: bob) == false)  // nothing to delete needs no unlock
        #expect(try store.isLocked())
    }

    @Test("locked, prompt allowed and dismissed: 77, still locked", arguments: Kind.allCases)
    func dismissedPrompt(_ kind: Kind) throws {
        let subject = try Subject(kind, promptAllowed: true)
        defer { subject.stop() }
        try subject.store.store("x", service: service, account: alice, label: "a")
        try subject.lock()
        // gnome-keyring here has no prompter to show, and answers as a user who dismissed it.
        #expect(throws: AuthError.unlockDismissed) { try subject.store.secret(service: service, account: alice) }
        #expect(try subject.store.isLocked())
    }
}
