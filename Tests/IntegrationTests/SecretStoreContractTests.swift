// SPDX-License-Identifier: Apache-2.0
import AuthController
import AuthControllerTesting
import DesktopSandbox
import Foundation
import Testing

/// The contract every ``SecretStore`` keeps, run against the real Secret Service store (the
/// shared sandbox's gnome-keyring, which is this process's session bus's: libsecret cannot be
/// pointed at another bus) and against its in-memory twin, so that tests written on the twin
/// hold for the real thing. What locking does to the real store is tested through `authctl`, on
/// keyrings of their own (FaultTests, SecretServiceImplementationTests): locking the shared one
/// would disturb every other test.
@Suite("SecretStore contract: real and in-memory")
struct SecretStoreContractTests {
    enum Kind: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case secretService = "Secret Service", inMemory = "in-memory"
        var testDescription: String { rawValue }
    }

    /// A fresh store of `kind`.
    struct Subject {
        let store: any SecretStore

        init(_ kind: Kind, promptAllowed: Bool = false) async throws {
            switch kind {
            case .secretService:
                _ = try await SharedSandbox.get()
                store = SecretServiceStore(promptAllowed: promptAllowed)
            case .inMemory:
                store = InMemorySecretStore(promptAllowed: promptAllowed, promptAnswer: .dismiss)
            }
        }

        func stop() {}
    }

    // Services of this test's own: the real keyring is shared with the other tests.
    let service = ServiceName(rawValue: "contract-" + UUID().uuidString.lowercased())!
    let other = ServiceName(rawValue: "contract-other-" + UUID().uuidString.lowercased())!
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
        #expect(try store.itemIsGone(ItemKey(service: service, account: alice)))
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

    @Test("locked, no prompt: the lock state still reads, nothing is searched; secrets, writes and listing are 69 \"locked\"")
    func lockedWithoutPrompt() async throws {
        let twin = InMemorySecretStore(promptAllowed: false)
        let store: any SecretStore = twin
        try store.store("x", service: service, account: alice, label: "a")
        twin.setLocked(true)
        #expect(try store.isLocked())
        let aliceKey = ItemKey(service: service, account: alice), bobKey = ItemKey(service: service, account: bob)
        // A locked collection proves nothing about its items (KeePassXC lists none): not searched.
        #expect(try store.lockState(andContains: aliceKey) == (locked: true, containsItem: nil))
        #expect(try store.lockState(andContains: bobKey) == (locked: true, containsItem: nil))
        #expect(try store.lockState(andContains: nil) == (locked: true, containsItem: nil))
        #expect(try store.itemIsGone(bobKey) == false)
        #expect(throws: AuthError.keyringLocked) { try store.secret(service: service, account: alice) }
        #expect(throws: AuthError.keyringLocked) { try store.store("y", service: service, account: bob, label: "b") }
        #expect(throws: AuthError.keyringLocked) { try store.deleteItem(service: service, account: alice) }
        #expect(throws: AuthError.keyringLocked) { try store.unlock() }
        #expect(throws: AuthError.keyringLockedForListing) { try store.accounts(service: service) }
        #expect(try store.isLocked())
    }

    @Test("locked, prompt allowed and dismissed: 77, still locked")
    func dismissedPrompt() async throws {
        let twin = InMemorySecretStore(promptAllowed: true, promptAnswer: .dismiss)
        try twin.store("x", service: service, account: alice, label: "a")
        twin.setLocked(true)
        #expect(throws: AuthError.unlockDismissed) { try twin.secret(service: service, account: alice) }
        #expect(try twin.isLocked())
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
        let sandbox = try await SharedSandbox.get()
        let store = SecretServiceStore(promptAllowed: false)
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
