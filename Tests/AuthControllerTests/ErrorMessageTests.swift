// SPDX-License-Identifier: Apache-2.0
import AuthControllerCore
import Testing

@Suite("Error messages: the library's words, and hints a front end words its own way")
struct ErrorMessageTests {
    static let alice = AccountID(rawValue: "alice")!

    /// Every hint, one of each case.
    static let everyHint: [AuthError.Hint] = [
        .signOutFirst, .forget(alice), .bindServer, .bindRegistrationServer, .registration, .signInWithoutRegistering,
        .allowUnlockPrompt, .raiseKeyringTimeout, .raiseServerTimeout, .sandbox, .loginService, .replaceLoginService,
        .eventCommand, .signOutToReplaceSettings, .signInOrOutToReplaceSettings,
    ]

    @Test("the library's words for a hint name no command and no option", arguments: everyHint)
    func libraryWords(_ hint: AuthError.Hint) {
        #expect(!hint.description.contains("`authctl"))
        #expect(!hint.description.contains("--"))
    }

    @Test("a message says its hints in the library's words, or in the words a front end gives")
    func wording() {
        let error = AuthError.invalidInput("the item of \(Self.alice) is not usable; \(hint: .forget(Self.alice))")
        #expect(error.message == "the item of alice is not usable; clear it by forgetting alice")
        #expect(error.message(wordingHints: { _ in "FORGET" }) == "the item of alice is not usable; FORGET")
        #expect(error.hints == [.forget(Self.alice)])
    }

    @Test("text alone is one part, so a literal equals the same text interpolated")
    func plainText() {
        let interpolated: AuthError.Message = "wrong password for \(Self.alice)"
        #expect(interpolated == "wrong password for alice")
        #expect(interpolated.parts == [.text("wrong password for alice")])
        #expect(AuthError.denied(interpolated) == .denied("wrong password for alice"))
    }

    @Test("text added to a message, or a message inside another, keeps the hints")
    func composition() {
        let advice: AuthError.Message = "try again, or \(hint: .raiseKeyringTimeout)"
        let nested: AuthError.Message = "the bus did not answer; \(advice)"
        #expect(nested.hints == [.raiseKeyringTimeout])
        #expect((nested + "; nothing changed").worded { _ in "X" } == "the bus did not answer; try again, or X; nothing changed")
    }
}
