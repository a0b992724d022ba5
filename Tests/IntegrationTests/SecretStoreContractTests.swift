import AuthController
import AuthControllerTesting
import DesktopSandbox
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
        let lock: () async throws -> Void
        let sandbox: DesktopSandbox?

        init(_ kind: Kind, promptAllowed: Bool = false) async throws {
            switch kind {
            case .secretService:
                let sandbox = try await DesktopSandbox.started()
                self.sandbox = sandbox
                store = SecretServiceStore(promptAllowed: promptAllowed, busAddress: sandbox.busAddress)
                lock = { try await Scenario(sandbox: sandbox).lockKeyring() }
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
    func roundTrip(_ kind: Kind) async throws {
        let subject = try await Subject(kind)
        defer { subject.stop() }
        let store = subject.store
        #expect(try store.secret(service: service, account: alice) == nil)
        #expect(try store.containsItem(service: service, account: alice) == false)
        #expect(try store.lockState(andContains: ItemKey(service: service, account: alice)) == (locked: false, containsItem: false))
        try store.store("one", service: service, account: alice, label: "a")
        #expect(try store.lockState(andContains: ItemKey(service: service, account: alice)) == (locked: false, containsItem: true))
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
    func lockedWithoutPrompt(_ kind: Kind) async throws {
        let subject = try await Subject(kind)
        defer { subject.stop() }
        let store = subject.store
        try store.store("x", service: service, account: alice, label: "a")
        try await subject.lock()
        #expect(try store.isLocked())
        #expect(try store.containsItem(service: service, account: alice))
        #expect(try store.containsItem(service: service, account: bob) == false)
        // What a status read asks, in one round trip.
        let aliceKey = ItemKey(service: service, account: alice), bobKey = ItemKey(service: service, account: bob)
        #expect(try store.lockState(andContains: aliceKey) == (locked: true, containsItem: true))
        #expect(try store.lockState(andContains: bobKey) == (locked: true, containsItem: false))
        #expect(try store.lockState(andContains: nil) == (locked: true, containsItem: false))
        #expect(throws: AuthError.keyringLocked) { try store.secret(service: service, account: alice) }
        #expect(try store.secret(service: service, account: bob) == nil)  // no item: nothing to unlock
        #expect(throws: AuthError.keyringLocked) { try store.store("y", service: service, account: bob, label: "b") }
        #expect(throws: AuthError.keyringLocked) { try store.deleteItem(service: service, account: alice) }
        #expect(throws: AuthError.keyringLocked) { try store.unlock() }
        #expect(throws: AuthError.keyringLockedForListing) { try store.accounts(service: service) }
        #expect(try store.deleteItem(service: service, account: bob) == false)  // nothing to delete needs no unlock
        #expect(try store.isLocked())
    }

    @Test("locked, prompt allowed and dismissed: 77, still locked", arguments: Kind.allCases)
    func dismissedPrompt(_ kind: Kind) async throws {
        let subject = try await Subject(kind, promptAllowed: true)
        defer { subject.stop() }
        try subject.store.store("x", service: service, account: alice, label: "a")
        try await subject.lock()
        // gnome-keyring here has no prompter to show, and answers as a user who dismissed it.
        #expect(throws: AuthError.unlockDismissed) { try subject.store.secret(service: service, account: alice) }
        #expect(try subject.store.isLocked())
    }

    struct Tokens: Codable, Equatable {
        var accessToken: String
        var refreshToken: String?
    }

    @Test("typed values: per service, account and server, never colliding with each other or with password hashes",
          arguments: Kind.allCases)
    func typedValues(_ kind: Kind) async throws {
        let subject = try await Subject(kind)
        defer { subject.stop() }
        let store = subject.store
        let first = try ServerURL(validating: "https://auth.example.org/token")
        let second = try ServerURL(validating: "http://127.0.0.1:8080/api")
        try store.store("hash", service: service, account: alice, label: "password")
        try store.store(Tokens(accessToken: "a1", refreshToken: "r1"), service: service, account: alice, server: first, label: "t")
        try store.store(Tokens(accessToken: "a2", refreshToken: nil), service: service, account: alice, server: second, label: "t")
        try store.store(Tokens(accessToken: "b1", refreshToken: "rb"), service: service, account: bob, server: first, label: "t")
        try store.store(Tokens(accessToken: "a1'", refreshToken: "r1'"), service: service, account: alice, server: first, label: "t")
        #expect(try store.value(Tokens.self, service: service, account: alice, server: first) == Tokens(accessToken: "a1'", refreshToken: "r1'"))
        #expect(try store.value(Tokens.self, service: service, account: alice, server: second) == Tokens(accessToken: "a2", refreshToken: nil))
        #expect(try store.value(Tokens.self, service: other, account: alice, server: first) == nil)
        #expect(try store.secret(service: service, account: alice) == "hash")
        #expect(try store.accounts(service: service, server: first).sorted() == [alice, bob].sorted())
        #expect(try store.accounts(service: service, server: second) == [alice])
        #expect(try store.accounts(service: service) == [alice])
        #expect(try store.delete(service: service, account: alice, server: first))
        #expect(try store.value(Tokens.self, service: service, account: alice, server: first) == nil)
        #expect(try store.value(Tokens.self, service: service, account: bob, server: first) != nil)
        #expect(try store.secret(service: service, account: alice) == "hash")
        // A secret that is not what was stored there is reported, not mistaken for a value.
        try store.store(Array("not json".utf8), contentType: "text/plain", for: ItemKey(service: service, account: bob, server: second),
                        label: "junk")
        #expect { try store.value(Tokens.self, service: service, account: bob, server: second) } throws: { error in
            (error as? AuthError)?.exitCode == 65
        }
    }

    @Test("token items carry the Tokens schema, the server attribute and a JSON secret, as secret-tool sees them")
    func tokenItemAsOtherToolsSeeIt() async throws {
        let sandbox = try await DesktopSandbox.started()
        defer { sandbox.stop() }
        let store = SecretServiceStore(promptAllowed: false, busAddress: sandbox.busAddress)
        let server = try ServerURL(validating: "https://auth.example.org/token")
        try store.store(Tokens(accessToken: "a", refreshToken: "r"), service: service, account: alice, server: server,
                        label: "authctl tokens for alice@example.org at https://auth.example.org/token (contract.service)")
        let scenario = try await Scenario(sandbox: sandbox)
        let search = try await scenario.secretTool("search", "service", service.rawValue, "account", alice.rawValue, "server", server.rawValue)
        #expect(search.stdout.contains("schema = io.github.authctl.Tokens") && search.stderr.contains("attribute.server = https://auth.example.org/token")
                || search.stdout.contains("attribute.server = https://auth.example.org/token"), "\(search)")
        let lookup = try await scenario.secretTool("lookup", "service", service.rawValue, "account", alice.rawValue, "server", server.rawValue)
        #expect(lookup.stdout == #"{"accessToken":"a","refreshToken":"r"}"# || lookup.stdout == #"{"refreshToken":"r","accessToken":"a"}"#, "\(lookup)")
    }
}
