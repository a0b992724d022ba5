// SPDX-License-Identifier: Apache-2.0
import AuthController
import Testing
import TestSupport

@Suite("Input rules")
struct InputRulesTests {
    @Test("valid account ids", arguments: [
        "a", "alice@example.org", "Ünïcødé@例え.jp", "bob $(touch x) `id` 'q' \"d\"", "inner  spaces ok",
        String(repeating: "x", count: 254),
    ].map(Sample.init))
    func validAccountIDs(_ text: Sample<String>) throws {
        #expect(try AccountID(validating: text.value).rawValue == text.value)
    }

    @Test("invalid account ids name the rule", arguments: [
        (Sample(""), "empty"),
        (Sample(String(repeating: "x", count: 255)), "254"),
        (Sample(String(repeating: "é", count: 128)), "254"),  // 256 bytes
        (Sample("tab\there"), "control"),
        (Sample("nl\n"), "control"),
        (Sample("del\u{7F}"), "control"),
        (Sample("c1\u{85}x"), "control"),
        (Sample(" leading"), "white space"),
        (Sample("trailing "), "white space"),
        (Sample("\u{3000}ideographic"), "white space"),
        (Sample("nbsp\u{A0}"), "white space"),
    ])
    func invalidAccountIDs(_ text: Sample<String>, _ rule: String) {
        #expect {
            try AccountID(validating: text.value)
        } throws: { error in
            guard let error = error as? AuthError, case .invalidInput(let message) = error else { return false }
            return error.exitCode == 65 && message.description.contains(rule)
        }
    }

    @Test("account ids compare exactly and sort by bytes")
    func accountOrder() throws {
        #expect(try AccountID(validating: "Alice") != AccountID(validating: "alice"))
        // Byte for byte, without Unicode normalisation: NFC é and NFD e + U+0301 are two accounts.
        let composed = try AccountID(validating: "caf\u{E9}"), decomposed = try AccountID(validating: "cafe\u{301}")
        #expect(composed != decomposed)
        #expect(Set([composed, decomposed]).count == 2)
        #expect(composed == (try AccountID(validating: "caf\u{E9}")))
        let sorted = try ["b", "B", "a", "é", "A"].map { try AccountID(validating: $0) }.sorted().map(\.rawValue)
        #expect(sorted == ["A", "B", "a", "b", "é"])
    }

    @Test("service names", arguments: [
        ("io.github.authctl", true), ("a", true), ("A-b_c.9", true), (String(repeating: "s", count: 255), true),
        ("", false), (String(repeating: "s", count: 256), false), ("with space", false), ("slash/", false),
        ("ünï", false), ("semi;colon", false),
    ])
    func serviceNames(_ text: String, _ valid: Bool) {
        #expect(((try? ServiceName(validating: text)) != nil) == valid)
        #expect((ServiceName(rawValue: text) != nil) == valid)
    }

    @Test("display names", arguments: [
        ("", true), ("Alice Example", true), ("  spaced  ", true), (String(repeating: "n", count: 256), true),
        (String(repeating: "n", count: 257), false), ("bell\u{07}", false), ("line\nbreak", false),
    ])
    func displayNames(_ text: String, _ valid: Bool) {
        #expect(((try? DisplayName.validate(text)) != nil) == valid)
    }

    @Test("passwords: 1–4096 bytes of UTF-8 without NUL", arguments: [
        (Sample([UInt8]("p".utf8)), true),
        (Sample([UInt8](repeating: 0x61, count: 4096)), true),
        (Sample([UInt8]("pässwörd".utf8)), true),
        (Sample([UInt8]()), false),
        (Sample([UInt8](repeating: 0x61, count: 4097)), false),
        (Sample([0x61, 0x00, 0x62]), false),
        (Sample([0xFF, 0xFE]), false),
        (Sample([0xC3]), false),
    ])
    func passwords(_ bytes: Sample<[UInt8]>, _ valid: Bool) {
        let result = bytes.value.withUnsafeBytes { buffer in Result { () throws(AuthError) in try Password(bytes: buffer) } }
        switch result {
        case .success: #expect(valid)
        case .failure(let error):
            #expect(!valid)
            #expect(error.exitCode == 65)
        }
    }
}

/// The table of exit codes in the README, "In scripts".
@Suite("Error to exit code")
struct ExitCodeTests {
    @Test("each family has its code", arguments: [
        (AuthError.notSignedIn("x"), Int32(1)), (.usage("x"), 64), (.invalidInput("x"), 65), (.unavailable("x"), 69),
        (.settingsIO("x"), 74), (.temporaryFailure("x"), 75), (.protocolError("x"), 76), (.denied("x"), 77),
        (.settingsUnsafe("x"), 78),
    ])
    func exitCodes(_ error: AuthError, _ code: Int32) {
        #expect(error.exitCode == code)
        #expect(error.message == "x")
    }
}
