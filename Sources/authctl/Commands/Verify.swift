// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthControllerCore

struct Verify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check a password against the signed-in account (re-authentication).",
        discussion: """
            For a service bound to an OpenID provider, the sign-in runs again (as `sign-in` runs \
            it): 0 when the same account signs in (its new tokens replace the old ones), 77 when \
            another one does (nothing changes).
            Exit status: 0 match, 77 mismatch, 1 nobody signed in.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Flag(help: "Read the password from standard input up to end of file.")
    var passwordStdin = false

    @OptionGroup(title: "OpenID provider") var openID: OpenIDSignInOptions

    func run() async throws {
        let controller = try global.makeController()
        if ((try? controller.binding()) ?? nil)?.tokenProtocol == .oidc {
            if passwordStdin { throw AuthError.usage("--password-stdin is not for an OpenID provider: sign in again in the browser or with a device code") }
            let outcome = try await controller.verify(try openID.request(account: nil, name: nil), presenter: SignInPrompts(mayPrompt: !global.noPrompt))
            Output.warnings(outcome)
            try Output.line("Signed in again; the session is renewed.")
            return
        }
        try openID.refuseWithoutProvider()
        try PasswordReader.requireSource(passwordStdin: passwordStdin)
        let password: Password
        if passwordStdin {
            password = try PasswordReader.readStandardInput()
        } else {
            guard let user = try controller.status().account else {
                throw AuthError.notSignedIn("nobody is signed in to \(controller.service)")
            }
            password = try PasswordReader.read(passwordStdin: false, prompt: "Password for \(user): ", confirm: false)
        }
        let outcome = try await controller.verify(password)
        Output.warnings(outcome)
        try Output.line("Password verified.")
    }
}
