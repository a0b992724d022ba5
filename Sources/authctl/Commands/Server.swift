// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthControllerCore

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
            discussion: """
                The last line, `proxy:`, is the proxy requests to the server go through (HOST:PORT) \
                or `direct`: https_proxy (or HTTPS_PROXY), http_proxy, all_proxy and no_proxy as \
                curl reads them, else the desktop's own proxy setting; loopback is always direct.
                Exit status: 0, or 1 when the service is not bound; 64 for a proxy variable that \
                is not an http:// proxy.
                """
        )

        @OptionGroup var global: GlobalOptions

        @Flag(help: "Print one JSON object.")
        var json = false

        func run() throws {
            let controller = try global.makeController()
            let binding = try controller.binding()
            let proxy = try binding.flatMap { (binding) throws(AuthError) in
                try ProxyRoute.proxyName(for: binding.server.rawValue, under: .current)
            }
            if json {
                try Output.json(BindingDocument(service: controller.service, binding, proxy: proxy))
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
                try Output.line("proxy: \(proxy ?? "direct")")
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
