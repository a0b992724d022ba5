import AuthController
import Testing

@Suite("Input rules (SPEC §7.3)")
struct InputRulesTests {
    @Test("valid account ids", arguments: [
        "a", "alice@example.org", "Ünïcødé@例え.jp", "bob $(touch x) `id` 'q' \"d\"", "inner  spaces ok",
        String(repeating: "x", count: 254),
    ])
    func validAccountIDs(_ text: String) throws {
        #expect(try AccountID(validating: text).rawValue == text)
    }

    @Test("invalid account ids name the rule", arguments: [
        ("", "empty"),
        (String(repeating: "x", count: 255), "254"),
        (String(repeating: "é", count: 128), "254"),  // 256 bytes
        ("tab\there", "control"),
        ("nl\n", "control"),
        ("del\u{7F}", "control"),
        ("c1\u{85}x", "control"),
        (" leading", "white space"),
        ("trailing ", "white space"),
        ("\u{3000}ideographic", "white space"),
        ("nbsp\u{A0}", "white space"),
    ])
    func invalidAccountIDs(_ text: String, _ rule: String) {
        #expect {
            try AccountID(validating: text)
        } throws: { error in
            guard let error = error as? AuthError, case .invalidInput(let message) = error else { return false }
            return error.exitCode == 65 && message.contains(rule)
        }
    }

    @Test("account ids compare exactly and sort by bytes")
    func accountOrder() throws {
        #expect(try AccountID(validating: "Alice") != AccountID(validating: "alice"))
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
        ([UInt8]("p".utf8), true),
        ([UInt8](repeating: 0x61, count: 4096), true),
        ([UInt8]("pässwörd".utf8), true),
        ([UInt8](), false),
        ([UInt8](repeating: 0x61, count: 4097), false),
        ([0x61, 0x00, 0x62], false),
        ([0xFF, 0xFE], false),
        ([0xC3], false),
    ])
    func passwords(_ bytes: [UInt8], _ valid: Bool) {
        let result = bytes.withUnsafeBytes { buffer in Result { () throws(AuthError) in try Password(bytes: buffer) } }
        switch result {
        case .success: #expect(valid)
        case .failure(let error): #expect(!valid && error.exitCode == 65)
        }
    }
}

@Suite("Error to exit code (SPEC §6.3)")
struct ExitCodeTests {
    @Test("each family has its code", arguments: [
        (AuthError.notSignedIn("x"), Int32(1)), (.usage("x"), 64), (.invalidInput("x"), 65), (.unavailable("x"), 69),
        (.settingsIO("x"), 74), (.temporaryFailure("x"), 75), (.denied("x"), 77), (.settingsUnsafe("x"), 78),
    ])
    func exitCodes(_ error: AuthError, _ code: Int32) {
        #expect(error.exitCode == code)
        #expect(error.message == "x")
    }
}
