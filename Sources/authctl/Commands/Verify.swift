import ArgumentParser
import AuthControllerCore

struct Verify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check a password against the signed-in account (re-authentication).",
        discussion: "Exit status: 0 match, 77 mismatch, 1 nobody signed in."
    )

    @OptionGroup var global: GlobalOptions

    @Flag(help: "Read the password from standard input up to end of file.")
    var passwordStdin = false

    func run() async throws {
        try PasswordReader.requireSource(passwordStdin: passwordStdin)
        let controller = try global.makeController()
        let password: Password
        if passwordStdin {
            password = try PasswordReader.readStandardInput()
        } else {
            guard let user = try controller.status().user else {
                throw AuthError.notSignedIn("nobody is signed in to \(controller.service)")
            }
            password = try PasswordReader.read(passwordStdin: false, prompt: "Password for \(user): ", confirm: false)
        }
        let outcome = try await controller.verify(password)
        Output.warnings(outcome)
        try Output.line("Password verified.")
    }
}
