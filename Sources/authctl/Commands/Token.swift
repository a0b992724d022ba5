// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthControllerCore

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
            try await controller.accessToken(minValid: .seconds(minValid), forceRefresh: refresh, checkingIDToken: idToken)
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
