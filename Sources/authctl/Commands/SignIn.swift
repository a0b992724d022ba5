import ArgumentParser
import AuthControllerCore

struct SignIn: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sign-in",
        abstract: "Sign an account in, enrolling it if it has no stored password hash.",
        discussion: """
            For a service bound to a token server (`authctl server set`, or --server here), the \
            password goes to the server and the tokens it answers with go to the keyring.
            Exit status: 0 signed in, 77 wrong password (nothing changes).
            """
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: "The account id (e.g. an e-mail address).")
    var account: String

    @Option(help: ArgumentHelp("Display name (default: your real name from the passwd database).", valueName: "name"))
    var name: String?

    @Flag(help: "Read the password from standard input up to end of file.")
    var passwordStdin = false

    @OptionGroup(title: "Token server") var server: ServerOptions

    @Flag(help: "Create the account at the token server first (protocol json).")
    var register = false

    func validate() throws {
        if server.url == nil && server.hasDetails {
            throw ValidationError("--protocol, --client-id, --scope and --revoke-url go with --server URL")
        }
    }

    func run() async throws {
        try PasswordReader.requireSource(passwordStdin: passwordStdin)
        let controller = try global.makeController()
        let account = try AccountID(validating: account)
        let name = try DisplayName.validate(name ?? Self.defaultDisplayName())
        let binding = try server.binding()
        let piped = passwordStdin ? try PasswordReader.readStandardInput() : nil
        let outcome = try await controller.signIn(account: account, name: name, register: register, binding: binding) { request throws(AuthError) in
            if let piped { return piped }
            return try PasswordReader.read(passwordStdin: false, prompt: request.isNew ? "New password for \(account): " : "Password for \(account): ",
                                           confirm: request.isNew)
        }
        Output.warnings(outcome)
        try Output.line(outcome.events.isEmpty ? "Already signed in to \(controller.service) as \(account)."
                                           : "Signed in to \(controller.service) as \(account).")
    }

    /// The real name from the passwd GECOS field, else the login name.
    static func defaultDisplayName() -> String {
        guard let user = ProcessEnvironment.currentUser else { return "" }
        return user.realName ?? user.name
    }
}
