// SPDX-License-Identifier: Apache-2.0
import AuthController
@testable import AuthControllerCore
import Testing

/// The parameters and why they were chosen: the README, "Why these Argon2 parameters".
@Suite("Argon2id hashing")
struct HasherTests {
    /// Small parameters keep the tests fast; the policy is the same.
    let hasher = Argon2idHasher(parameters: .init(memoryKiB: 64, iterations: 2, parallelism: 1))

    func password(_ text: String) -> Password { try! Password(text) }

    @Test("defaults are RFC 9106's second option and at least OWASP's")
    func defaults() {
        let standard = Argon2idHasher().parameters
        #expect(standard == .init(memoryKiB: 65536, iterations: 3, parallelism: 4))
        #expect(standard.memoryKiB >= 19456)
        #expect(standard.iterations >= 2)
        #expect(standard.parallelism >= 1)
    }

    @Test("a new hash is a PHC string with a 16-byte salt and 32-byte tag, fresh each time")
    func phcFormat() throws {
        let first = try Argon2idHasher().hash(password("hunter2"))
        let second = try Argon2idHasher().hash(password("hunter2"))
        #expect(first != second)
        let fields = first.split(separator: "$")
        try #require(fields.count == 5)
        #expect(fields[0] == "argon2id")
        #expect(fields[1] == "v=19")
        #expect(fields[2] == "m=65536,t=3,p=4")
        #expect(fields[3].count == 22)  // 16 bytes, unpadded base64
        #expect(fields[4].count == 43)  // 32 bytes
    }

    @Test("verify matches the right password only")
    func verify() throws {
        let encoded = try hasher.hash(password("correct horse"))
        #expect(hasher.verify(password("correct horse"), against: encoded) == .match(upgradedHash: nil))
        #expect(hasher.verify(password("correct horsE"), against: encoded) == .mismatch)
    }

    @Test("passwords are NFKC-normalised before hashing")
    func normalisation() throws {
        let composed = try hasher.hash(password("\u{00C5}ngstr\u{00F6}m"))
        #expect(hasher.verify(password("A\u{030A}ngstro\u{0308}m"), against: composed) == .match(upgradedHash: nil))
        let ligature = try hasher.hash(password("\u{FB01}sh"))  // "ﬁsh"
        #expect(hasher.verify(password("fish"), against: ligature) == .match(upgradedHash: nil))
    }

    @Test("weaker stored parameters are upgraded, each to the larger value")
    func upgrade() throws {
        let weak = Argon2idHasher(parameters: .init(memoryKiB: 128, iterations: 1, parallelism: 2))
        let encoded = try weak.hash(password("pw"))
        let strong = Argon2idHasher(parameters: .init(memoryKiB: 256, iterations: 2, parallelism: 1))
        guard case .match(let upgraded?) = strong.verify(password("pw"), against: encoded) else {
            Issue.record("expected an upgrade")
            return
        }
        #expect(upgraded.contains("$m=256,t=2,p=2$"))  // p stays 2: never a downgrade
        #expect(strong.verify(password("pw"), against: upgraded) == .match(upgradedHash: nil))
    }

    @Test("a mismatch never upgrades")
    func noUpgradeOnMismatch() throws {
        let weak = Argon2idHasher(parameters: .init(memoryKiB: 32, iterations: 1, parallelism: 1))
        let encoded = try weak.hash(password("pw"))
        #expect(hasher.verify(password("other"), against: encoded) == .mismatch)
    }

    @Test("foreign or insane secrets are never fed to the hasher", arguments: [
        "",
        "hunter2",
        "$2b$12$abcdefghijklmnopqrstuu5Q0OB5nTvV6bsLDPm9rnLoVX0ZkRyyK",
        "$argon2i$v=19$m=65536,t=3,p=4$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA",
        "$argon2id$v=16$m=65536,t=3,p=4$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA",
        "$argon2id$v=19$m=2097152,t=3,p=4$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA",
        "$argon2id$v=19$m=65536,t=65,p=4$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA",
        "$argon2id$v=19$m=65536,t=3,p=65$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA",
        "$argon2id$v=19$m=65536,t=0,p=4$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA",
        "$argon2id$v=19$m=65536,t=3$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA",
        "$argon2id$v=19$m=65536,t=3,p=4,p=4$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA",
        "$argon2id$v=19$m=+65536,t=3,p=4$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA",
        "$argon2id$v=19$m=65536,t=3,p=4$c2Fs!!$aGFzaGhhc2hoYXNoaGFzaA",
        "$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHRzYWx0$" + String(repeating: "A", count: 220),
    ])
    func unusable(_ stored: String) {
        guard case .unusable = hasher.verify(password("pw"), against: stored) else {
            Issue.record("\(stored) was not refused")
            return
        }
    }
}
