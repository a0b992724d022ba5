// SPDX-License-Identifier: Apache-2.0
import AuthController
import AuthControllerTesting
import Testing

/// ``Keyring`` on the real Secret Service (a private gnome-keyring) and on its in-memory twin.
@Suite("Keyring on the real Secret Service and in memory")
struct KeyringIntegrationTests {
    struct Credentials: Codable, Equatable {
        var apiKey: String
        var expires: Int
    }

    @Test("set, read, replace, list, remove: the same on both stores", arguments: SecretStoreContractTests.Kind.allCases)
    func roundTrip(_ kind: SecretStoreContractTests.Kind) async throws {
        let subject = try await SecretStoreContractTests.Subject(kind)
        defer { subject.stop() }
        let keyring = Keyring(service: ServiceName(rawValue: "com.example.keyring")!, store: subject.store)
        let alice = AccountID(rawValue: "alice@example.org")!, bob = AccountID(rawValue: "bob")!
        try keyring.set(Credentials(apiKey: "one", expires: 1), for: alice)
        try keyring.set(Credentials(apiKey: "two", expires: 2), for: alice)
        try keyring.set(Credentials(apiKey: "bob's", expires: 3), for: bob)
        #expect(try keyring.value(Credentials.self, for: alice) == Credentials(apiKey: "two", expires: 2))
        #expect(try keyring.accounts() == [alice, bob])
        #expect(try keyring.remove(alice))
        #expect(try keyring.value(Credentials.self, for: alice) == nil)
        #expect(try keyring.accounts() == [bob])
    }
}
