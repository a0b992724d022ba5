// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthControllerCore

struct SignIn: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sign-in",
        abstract: "Sign an account in, enrolling it if it has no stored password hash.",
        discussion: """
            For a service bound to a token server (`authctl server set`, or --server here), the \
            password goes to the server and the tokens it answers with go to the keyring.
            For a service bound to an OpenID provider (--protocol oidc), there is no password: \
            the person signs in in the browser (its URL is printed, and $BROWSER or xdg-open \
            started) or, with --flow device or without a browser to show, by entering a code on \
            any device. ACCOUNT is then optional: given, it is the account that must sign in.
            Over SSH (SSH_CONNECTION or SSH_TTY set, BROWSER not) there is no browser here, even \
            with a forwarded display. A browser command that fails within 5 seconds (xdg-open \
            exits 3 when it finds no browser) turns the sign-in to the device flow when the \
            provider has one. At a terminal, the browser flow also takes the address the browser \
            ends on, pasted: sign in in a browser on any machine, copy the address it shows \
            (http://127.0.0.1:PORT/callback?code=…&state=…, even when the page does not load), \
            and paste it. It is checked exactly as the browser's own answer would be.
            Requests to the provider go through https_proxy (or all_proxy) as curl reads it.
            Exit status: 0 signed in, 77 wrong password or refused at the provider (nothing \
            changes), 75 not completed within --timeout, 76 an ID token that fails a check.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: "The account id (e.g. an e-mail address); optional for an OpenID provider.")
    var account: String?

    @Option(help: ArgumentHelp("Display name (default: your real name from the passwd database).", valueName: "name"))
    var name: String?

    @Flag(help: "Read the password from standard input up to end of file.")
    var passwordStdin = false

    @OptionGroup(title: "Token server") var server: ServerOptions

    @Flag(help: "Create the account at the token server first (protocol json).")
    var register = false

    @OptionGroup(title: "OpenID provider") var openID: OpenIDSignInOptions

    func validate() throws {
        if server.url == nil && server.hasDetails {
            throw ValidationError("--protocol, --client-id, --scope, --revoke-url, --account-claim, --device-authorization-url and --redirect-port go with --server URL")
        }
    }

    func run() async throws {
        let controller = try global.makeController()
        let binding = try server.binding()
        // An unreadable settings file is reported by the sign-in that follows (which may replace it).
        let bound = binding ?? ((try? controller.binding()) ?? nil)
        if bound?.tokenProtocol == .oidc {
            if passwordStdin || register {
                throw AuthError.usage("--password-stdin and --register are not for an OpenID provider: its accounts sign in in the browser or with a device code")
            }
            let result = try await controller.signIn(at: binding, try openID.request(account: account, name: name), presenter: SignInPrompts(mayPrompt: !global.noPrompt))
            Output.warnings(result.outcome)
            try Output.line(result.outcome.events.isEmpty ? "Already signed in to \(controller.service) as \(result.account)."
                                                         : "Signed in to \(controller.service) as \(result.account).")
            return
        }
        try openID.refuseWithoutProvider()
        guard let given = account else { throw AuthError.usage("sign-in needs the ACCOUNT to sign in") }
        try PasswordReader.requireSource(passwordStdin: passwordStdin)
        let account = try AccountID(validating: given)
        let name = try DisplayName.validate(name ?? Self.defaultDisplayName())
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

/// The options of a sign-in at an OpenID provider, shared by `sign-in` and `verify`.
struct OpenIDSignInOptions: ParsableArguments {
    @Option(help: ArgumentHelp("OpenID provider: browser or device (default: browser when one can be shown, else device).", valueName: "flow"))
    var flow: String?

    @Option(help: ArgumentHelp("OpenID provider: seconds to complete the sign-in (default: 300).", valueName: "seconds"))
    var timeout: Double?

    func validate() throws {
        if let flow, AuthController.SignInFlow(rawValue: flow) == nil { throw ValidationError("--flow takes browser or device") }
        if let timeout, !(timeout > 0 && timeout <= 86_400) {
            throw ValidationError("--timeout takes a number of seconds greater than 0 and at most 86400")
        }
    }

    /// The request the options and `account`/`name` describe.
    func request(account: String?, name: String?) throws(AuthError) -> AuthController.OpenIDSignIn {
        AuthController.OpenIDSignIn(account: try account.map { (text) throws(AuthError) in try AccountID(validating: text) },
                                    name: try name.map { (text) throws(AuthError) in try DisplayName.validate(text) },
                                    flow: flow.flatMap(AuthController.SignInFlow.init(rawValue:)),
                                    timeout: .seconds(timeout ?? 300), canOpenBrowser: SignInPrompts.canOpenBrowser)
    }

    /// --flow and --timeout mean nothing without an OpenID provider.
    func refuseWithoutProvider() throws(AuthError) {
        if flow != nil || timeout != nil { throw .usage("--flow and --timeout are for a service bound to an OpenID provider (protocol oidc)") }
    }
}
