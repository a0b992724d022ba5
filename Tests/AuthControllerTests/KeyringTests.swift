// SPDX-License-Identifier: Apache-2.0
import AuthController
import AuthControllerTesting
import Testing

/// ``Keyring``, the handle on one service's `Codable` items, on the in-memory store.
@Suite("Keyring: a service's Codable values")
struct KeyringTests {
    struct Credentials: Codable, Equatable {
        var apiKey: String
        var scopes: [String]
    }

    let store = InMemorySecretStore()
    let service = ServiceName(rawValue: "com.example.notes")!
    let alice = AccountID(rawValue: "alice@example.org")!
    let bob = AccountID(rawValue: "bob")!

    @Test("set, read, replace in place, list, remove")
    func roundTrip() throws {
        let keyring = Keyring(service: service, store: store)
        #expect(try keyring.value(Credentials.self, for: alice) == nil)
        try keyring.set(Credentials(apiKey: "one", scopes: []), for: alice)
        try keyring.set(Credentials(apiKey: "two", scopes: ["read"]), for: alice)
        try keyring.set(Credentials(apiKey: "bob's", scopes: []), for: bob)
        #expect(try keyring.value(Credentials.self, for: alice) == Credentials(apiKey: "two", scopes: ["read"]))
        #expect(try keyring.contains(alice))
        #expect(try keyring.accounts() == [alice, bob])
        #expect(try keyring.remove(alice))
        #expect(try keyring.remove(alice) == false)
        #expect(try keyring.value(Credentials.self, for: alice) == nil)
        #expect(try keyring.accounts() == [bob])
    }

    @Test("the value is the store's typed item: JSON under the service and account")
    func sameItemAsTheStore() throws {
        let keyring = Keyring(service: service, store: store)
        try keyring.set(Credentials(apiKey: "k", scopes: ["a"]), for: alice)
        #expect(try store.value(Credentials.self, service: service, account: alice) == Credentials(apiKey: "k", scopes: ["a"]))
        let bytes = try #require(try store.secret(ItemKey(service: service, account: alice)))
        #expect(String(decoding: bytes, as: UTF8.self).hasPrefix("{"))
    }

    @Test("handles of two services, or of a service and a server, never see each other's items")
    func isolation() throws {
        let server = try ServerURL(validating: "https://auth.test/token")
        let notes = Keyring(service: service, store: store)
        let other = Keyring(service: ServiceName(rawValue: "com.example.other")!, store: store)
        let atServer = Keyring(service: service, server: server, store: store)
        try notes.set("notes", for: alice)
        try other.set("other", for: alice)
        try atServer.set("server", for: alice)
        #expect(try notes.value(String.self, for: alice) == "notes")
        #expect(try other.value(String.self, for: alice) == "other")
        #expect(try atServer.value(String.self, for: alice) == "server")
        try atServer.remove(alice)
        #expect(try notes.value(String.self, for: alice) == "notes")
    }

    @Test("a secret that is not the type asked for is 65 naming the item")
    func wrongType() throws {
        let keyring = Keyring(service: service, store: store)
        try keyring.set("just text", for: alice)
        #expect { try keyring.value(Credentials.self, for: alice) } throws: { error in
            (error as? AuthError)?.exitCode == 65 && "\(error)".contains("alice@example.org")
        }
    }

    @Test("a locked store: listing is refused, reading unlocks through the prompt when prompts are allowed")
    func locked() throws {
        let prompting = InMemorySecretStore(promptAllowed: true)
        let keyring = Keyring(service: service, store: prompting)
        try keyring.set(1, for: alice)
        prompting.setLocked(true)
        #expect(throws: AuthError.keyringLockedForListing) { try keyring.accounts() }
        #expect(try keyring.contains(alice))
        #expect(prompting.promptCount == 0)
        #expect(try keyring.value(Int.self, for: alice) == 1)
        #expect(prompting.promptCount == 1)
    }
}
