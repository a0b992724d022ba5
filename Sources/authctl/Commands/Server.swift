import ArgumentParser
import AuthControllerCore
import Synchronization

/// The options that bind a service to a token server, shared by `server set` and `sign-in --server`.
struct ServerOptions: ParsableArguments {
    @Option(name: .customLong("server"), help: ArgumentHelp("The token server: an oauth2 token endpoint, or a json API's base URL.", valueName: "url"))
    var url: String?

    @Option(name: .customLong("protocol"), help: ArgumentHelp("oauth2 (default), json, or oidc (an OpenID Connect provider).", valueName: "protocol"))
    var tokenProtocol: String?

    @Option(name: .customLong("client-id"), help: ArgumentHelp("The OAuth client id to send.", valueName: "id"))
    var clientID: String?

    @Option(help: ArgumentHelp("The OAuth scope to ask for (words separated by single spaces).", valueName: "scope"))
    var scope: String?

    @Option(name: .customLong("revoke-url"), help: ArgumentHelp("Where to revoke the refresh token at sign-out (RFC 7009).", valueName: "url"))
    var revokeURL: String?

    @Option(name: .customLong("account-claim"), help: ArgumentHelp("oidc: the ID-token claim that is the account id (default: email, else preferred_username, else sub).", valueName: "claim"))
    var accountClaim: String?

    @Option(name: .customLong("device-authorization-url"), help: ArgumentHelp("oidc: the device authorization endpoint, when discovery names none.", valueName: "url"))
    var deviceAuthorizationURL: String?

    @Option(name: .customLong("redirect-port"), help: ArgumentHelp("oidc: a fixed port for the browser's return to 127.0.0.1 (default: one the system picks).", valueName: "port"))
    var redirectPort: String?

    var hasDetails: Bool {
        tokenProtocol != nil || clientID != nil || scope != nil || revokeURL != nil || accountClaim != nil
            || deviceAuthorizationURL != nil || redirectPort != nil
    }

    /// The binding the options describe, checked (65 naming the rule, 64 for an oidc binding
    /// without a client id); `nil` without `--server`.
    func binding(url given: String? = nil) throws(AuthError) -> ServerBinding? {
        guard let url = given ?? url else { return nil }
        return try ServerBinding(validatingServer: url, protocol: tokenProtocol, clientID: clientID, scope: scope, revokeURL: revokeURL,
                                 accountClaim: accountClaim, deviceAuthorizationURL: deviceAuthorizationURL, redirectPort: redirectPort)
    }
}

struct Server: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "server",
        abstract: "Bind the service to a token server, show the binding, or remove it.",
        subcommands: [Set.self, Show.self, Unset.self]
    )

    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set",
            abstract: "Bind the service to a token server (https, or http to a loopback host).",
            discussion: """
                Refused (exit 65) while someone is signed in to the service: sign out first. A \
                different server is also refused while tokens kept by `sign-out --keep-credentials` \
                remain at the current one: forget those accounts first.
                With --protocol oidc the URL is the provider's issuer, and --client-id is required: \
                the provider's endpoints are found by OpenID Connect discovery, now and at every \
                sign-in (exit 76 for a document that breaks a rule, 69 for a provider that fails).
                """
        )

        @OptionGroup var global: GlobalOptions

        @Argument(help: "The token server's URL.")
        var url: String

        @OptionGroup var options: ServerOptions

        func validate() throws {
            if options.url != nil { throw ValidationError("give the URL once, as the argument of `server set`") }
        }

        func run() async throws {
            let controller = try global.makeController()
            let binding = try await controller.discoveringProvider(of: try options.binding(url: url)!)
            try controller.setBinding(binding)
            try Output.line("\(controller.service) is bound to \(binding.server) (\(binding.tokenProtocol.rawValue)).")
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "show",
            abstract: "Print the service's binding.",
            discussion: "Exit status: 0, or 1 when the service is not bound."
        )

        @OptionGroup var global: GlobalOptions

        @Flag(help: "Print one JSON object.")
        var json = false

        func run() throws {
            let controller = try global.makeController()
            let binding = try controller.binding()
            if json {
                try Output.json(BindingDocument(service: controller.service, binding))
            } else if let binding {
                try Output.line("server: \(binding.server)")
                try Output.line("protocol: \(binding.tokenProtocol.rawValue)")
                if let clientID = binding.clientID { try Output.line("client-id: \(clientID)") }
                if let scope = binding.scope { try Output.line("scope: \(scope)") }
                if let revokeURL = binding.revokeURL { try Output.line("revoke-url: \(revokeURL)") }
                if let openID = binding.openID {
                    if let claim = openID.accountClaim { try Output.line("account-claim: \(claim)") }
                    if let url = openID.deviceAuthorizationURL { try Output.line("device-authorization-url: \(url)") }
                    if let port = openID.redirectPort { try Output.line("redirect-port: \(port)") }
                    if let issuer = openID.provider?.issuer { try Output.line("issuer: \(Output.escapingControlCharacters(issuer))") }
                }
            } else {
                Output.diagnostic("\(controller.service) is not bound to a token server")
            }
            if binding == nil { throw ExitCode(ExitStatus.no) }
        }
    }

    struct Unset: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "unset",
            abstract: "Remove the service's binding.",
            discussion: """
                Refused (exit 65) while someone is signed in to the service: sign out first; and \
                while tokens kept by `sign-out --keep-credentials` remain: forget those accounts first.
                """
        )

        @OptionGroup var global: GlobalOptions

        func run() throws {
            let controller = try global.makeController()
            try controller.setBinding(nil)
            try Output.line("\(controller.service) is not bound to a token server.")
        }
    }
}

struct Token: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Print the signed-in account's access token, refreshed first when it is about to expire.",
        discussion: """
            The token is refreshed when it expires in less than --min-valid seconds (at most half \
            the lifetime the server granted). One refresh at a time, however many processes ask.
            Use it as `curl -H "Authorization: Bearer $(authctl token)" …`.
            Exit status: 0; 1 nobody signed in; 65 the service is not bound; 77 the server ended \
            the session (sign in again); 69/75/76 the server failed, did not answer, or was not \
            understood, or another `authctl token` held the refresh lock beyond the wait — but a \
            token that has not expired yet is printed anyway, with a warning.
            A server that issues no refresh token: its token is printed as it is until it expires \
            (--refresh adds a warning that it cannot be renewed); then the session ends (77).
            SIGINT, SIGTERM and SIGHUP end the command only once a refresh under way is answered \
            and stored (each step within its deadline), so the refresh token the server rotated \
            is kept; the command then prints nothing.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Option(name: .customLong("min-valid"), help: ArgumentHelp("Seconds the token must still be valid (default: 60).", valueName: "seconds"))
    var minValid: UInt64 = 60

    @Flag(help: "Refresh whatever the expiry (e.g. after the resource server answered 401).")
    var refresh = false

    @Flag(help: "Print one JSON object.")
    var json = false

    @Flag(name: .customLong("id-token"), help: "Print the ID token an OpenID provider issued instead (refreshed first when it expires within --min-valid).")
    var idToken = false

    func validate() throws {
        if minValid > 365 * 86_400 { throw ValidationError("--min-valid takes a number of seconds of at most a year") }
    }

    func run() async throws {
        try await Self.report(global.settings, minValid: minValid, refresh: refresh, json: json, idToken: idToken)
    }

    /// The command itself, for the parsed options and for ``FastPath``.
    static func report(_ global: GlobalSettings, minValid: UInt64, refresh: Bool, json: Bool, idToken: Bool = false) async throws {
        let controller = try global.makeController()
        let token = try await FirstSignal.deferred {  () async throws(AuthError) in
            try await controller.accessToken(minValid: minValid, forceRefresh: refresh, checkingIDToken: idToken)
        }
        for warning in token.warnings { Output.diagnostic(Output.words(warning)) }
        if idToken && token.idToken == nil {
            throw AuthError.invalidInput("\(token.account) holds no ID token at \(controller.service): only OpenID providers issue them, and this one issued none")
        }
        if json {
            try Output.json(TokenDocument(service: controller.service, token, includingIDToken: idToken))
        } else {
            try Output.line(idToken ? token.idToken! : token.token)
        }
    }
}

/// The first of `signals` to arrive while it listens; while it does, they do not end the process.
struct FirstSignal: Sendable {
    private final class Seen: Sendable {
        let signal = Mutex<ProcessSignal?>(nil)
    }

    private let seen = Seen()
    private let listener: Task<Void, Never>

    init(listeningTo signals: [ProcessSignal]) {
        let deliveries = ProcessSignal.deliveries(of: signals)
        listener = Task { [seen] in
            for await signal in deliveries {
                seen.signal.withLock { $0 = $0 ?? signal }
            }
        }
    }

    /// The outcome of `call`, during which SIGINT, SIGTERM and SIGHUP wait: a refresh the server
    /// has answered has rotated the refresh token there, and ending the process before the new
    /// one is stored would end the session. So a signal waits for the call, whose every step has
    /// a deadline, and ends the process after it (the command then prints nothing).
    static func deferred<T>(_ call: () async throws(AuthError) -> T) async throws -> T {
        let signalled = FirstSignal(listeningTo: [.interrupt, .terminate, .hangUp])
        let result: Result<T, AuthError>
        do {
            result = .success(try await call())
        } catch {
            result = .failure(error)
        }
        if let signal = signalled.stop() {
            signal.raiseWithDefaultAction()
            throw ExitCode(128 + signal.rawValue)
        }
        return try result.get()
    }

    /// Stops listening and returns the first signal that arrived, if any.
    func stop() -> ProcessSignal? {
        listener.cancel()
        return seen.signal.withLock { $0 }
    }
}
