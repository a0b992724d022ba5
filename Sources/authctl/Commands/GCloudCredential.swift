// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthControllerCore

/// `authctl gcloud-credential`: the executable of Google's executable-sourced credentials
/// (workload and workforce identity federation), answering with the session's ID token;
/// `gcloud-credential setup FILE --audience AUDIENCE` writes the credential configuration that
/// names it.
struct GCloudCredential: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gcloud-credential",
        abstract: "Give Google Cloud's libraries the session's ID token (an executable-sourced credential).",
        discussion: """
            `authctl gcloud-credential setup FILE --audience AUDIENCE` writes FILE (0600): an \
            external_account credential configuration whose executable is this authctl. With \
            GOOGLE_APPLICATION_CREDENTIALS=FILE and GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES=1, \
            Google's client libraries and gcloud then run `authctl --service SERVICE \
            gcloud-credential`, which prints the JSON they read: the session's verified ID token \
            (refreshed when due, as `authctl token --id-token` refreshes it) and its expiry, or \
            {"success":false,"code":…,"message":…} with the exit code of the failure. They send \
            the ID token to the token URL (Google's STS, https://sts.googleapis.com/v1/token by \
            default) for an access token. AUDIENCE names the workload or workforce identity pool's \
            provider, which must accept the OpenID provider's issuer with the client id as the \
            audience.
            It needs a service bound to an OpenID provider, never prompts, never opens a browser \
            and never reads standard input; it writes no output file (tokens do not go to disk).
            """
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: ArgumentHelp("setup, to write a credential configuration.", valueName: "operation"))
    var operation: String?

    @Argument(help: ArgumentHelp("For setup: the credential configuration file to write.", valueName: "file"))
    var file: String?

    @Option(help: ArgumentHelp("For setup: the workload or workforce identity pool provider's audience.", valueName: "audience"))
    var audience: String?

    @Option(name: .customLong("token-url"), help: ArgumentHelp("For setup: the token exchange endpoint (default: Google's STS).", valueName: "url"))
    var tokenURL: String?

    @Option(name: .customLong("service-account-impersonation-url"),
            help: ArgumentHelp("For setup: the service account to impersonate, as IAM Credentials' generateAccessToken URL.", valueName: "url"))
    var impersonationURL: String?

    func validate() throws {
        guard let operation else {
            guard audience == nil, tokenURL == nil, impersonationURL == nil else {
                throw ValidationError("--audience, --token-url and --service-account-impersonation-url are for setup")
            }
            return
        }
        guard operation == "setup" else { throw ValidationError("the only operation is setup; without one, the ID token is printed") }
        guard let file, !file.isEmpty else { throw ValidationError("setup needs the file to write") }
        guard let audience, (1...1024).contains(audience.utf8.count), audience.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw ValidationError("setup needs --audience: the identity pool provider's audience, up to 1024 visible ASCII characters")
        }
    }

    func run() async throws {
        if operation == "setup" {
            try await setUp(file!, audience: audience!)
        } else {
            try await Self.answer(global.settings)
        }
    }

    private func setUp(_ file: String, audience: String) async throws {
        // Checked before anything changes.
        let tokenURL = try tokenURL.map { (url) throws(AuthError) in try ServerURL(validating: url, role: "token URL") }
        let impersonationURL = try impersonationURL.map { (url) throws(AuthError) in
            try ServerURL(validating: url, role: "service account impersonation URL")
        }
        let controller = try global.makeController()
        guard let binding = try controller.binding(), binding.tokenProtocol == .oidc else {
            throw AuthError.invalidInput("\(controller.service) is not bound to an OpenID provider, so it has no ID token for Google Cloud; bind one with `authctl server set URL --protocol oidc`")
        }
        guard let binary = ProcessEnvironment.executablePath else {
            throw AuthError.unavailable("cannot tell where this authctl is (/proc/self/exe); Google's libraries need its absolute path")
        }
        let configuration = ExternalAccount(
            audience: audience, tokenURL: tokenURL?.rawValue ?? "https://sts.googleapis.com/v1/token",
            impersonationURL: impersonationURL?.rawValue,
            command: "\(AWSCredential.quoted(binary)) --service \(controller.service.rawValue) gcloud-credential")
        let bytes = Array(try JSONLineEncoder().encode(configuration).utf8) + [0x0A]
        try await FirstSignal.deferred { () async throws(AuthError) in
            try ConfigurationFile(path: file, named: "the credential configuration", sizeLimit: 1024 * 1024).replace(with: bytes, mode: 0o600)
        }
        try Output.line("Google's libraries given \(file) now get the ID token of \(controller.service).")
    }

    /// The executable itself. Every failure is also the JSON Google's libraries read, on stdout.
    static func answer(_ global: GlobalSettings) async throws {
        let tokenType = ProcessEnvironment.value("GOOGLE_EXTERNAL_ACCOUNT_TOKEN_TYPE") ?? ExecutableAnswer.idTokenType
        do {
            guard tokenType == ExecutableAnswer.idTokenType || tokenType == ExecutableAnswer.jwtType else {
                // Echoed only when it is plain text: nothing in it can reorder or hide the line.
                let printable = tokenType.utf8.count <= 100 && tokenType.utf8.allSatisfy { (0x20...0x7E).contains($0) }
                throw ExecutableFailure(code: "UNSUPPORTED_TOKEN_TYPE", exitCode: 65,
                                        message: "Google's library asks for \(printable ? "a token of type \(tokenType)" : "another type of token"); authctl gives an ID token (\(ExecutableAnswer.idTokenType) or \(ExecutableAnswer.jwtType))")
            }
            // Never the unlock prompt: a library may run it with nobody at the screen.
            var settings = global
            settings.noPrompt = true
            let controller = try settings.makeController()
            let (token, idToken) = try await FirstSignal.deferred { () async throws(AuthError) in
                try await controller.verifiedIDToken(for: "Google Cloud")
            }
            // No warning beside a success: Google's libraries read stderr with stdout, as one
            // JSON document (google-auth's pluggable credentials: `stderr=subprocess.STDOUT`).
            try Output.json(ExecutableAnswer(tokenType: tokenType, idToken: idToken,
                                             expirationTime: token.idTokenExpiresAt.map { Int64(Timestamp.microseconds($0) / 1_000_000) }))
        } catch let failure as ExecutableFailure {
            try fail(failure)
        } catch let error as AuthError {
            try fail(ExecutableFailure(error))
        }
    }

    private static func fail(_ failure: ExecutableFailure) throws -> Never {
        try Output.json(failure)
        Output.diagnostic(failure.message)
        throw ExitCode(failure.exitCode)
    }
}

/// Success, as Google's executable-sourced credentials read it.
private struct ExecutableAnswer: Encodable {
    static let idTokenType = "urn:ietf:params:oauth:token-type:id_token"
    static let jwtType = "urn:ietf:params:oauth:token-type:jwt"

    let tokenType: String
    let idToken: String
    /// Whole seconds since the epoch, by the local clock; left out when unknown (the library
    /// then runs the executable each time).
    let expirationTime: Int64?

    private enum CodingKeys: String, CodingKey {
        case version, success, tokenType = "token_type", idToken = "id_token", expirationTime = "expiration_time"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(1, forKey: .version)
        try container.encode(true, forKey: .success)
        try container.encode(tokenType, forKey: .tokenType)
        try container.encode(idToken, forKey: .idToken)
        try container.encodeIfPresent(expirationTime, forKey: .expirationTime)
    }
}

/// A failure, as Google's executable-sourced credentials read it, and authctl's exit code for it.
private struct ExecutableFailure: Error, Encodable {
    let code: String
    let exitCode: Int32
    let message: String

    init(code: String, exitCode: Int32, message: String) {
        self.code = code
        self.exitCode = exitCode
        self.message = message
    }

    /// `error`'s code by its exit code (1, 77, 69, 75, 76, 64); a service that is not bound to an
    /// OpenID provider, or another failure of its settings or keyring, is its own exit code with
    /// the nearest word.
    init(_ error: AuthError) {
        let exitCode = error.exitCode
        let code = switch exitCode {
        case 1: "NOT_SIGNED_IN"
        case 77: "SESSION_ENDED"
        case 75: "TIMEOUT"
        case 76: "PROTOCOL"
        case 64, 65: "INVALID_INPUT"
        default: "UNAVAILABLE"
        }
        self.init(code: code, exitCode: exitCode, message: Output.words(error.explanation))
    }

    private enum CodingKeys: String, CodingKey { case version, success, code, message }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(1, forKey: .version)
        try container.encode(false, forKey: .success)
        try container.encode(code, forKey: .code)
        try container.encode(message, forKey: .message)
    }
}

/// The `external_account` credential configuration `setup` writes.
private struct ExternalAccount: Encodable {
    let audience: String
    let tokenURL: String
    let impersonationURL: String?
    let command: String

    private enum CodingKeys: String, CodingKey {
        case type, audience, subjectTokenType = "subject_token_type", tokenURL = "token_url", credentialSource = "credential_source"
        case impersonationURL = "service_account_impersonation_url"
    }
    private enum SourceKeys: String, CodingKey { case executable }
    private enum ExecutableKeys: String, CodingKey { case command, timeoutMillis = "timeout_millis" }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode("external_account", forKey: .type)
        try container.encode(audience, forKey: .audience)
        try container.encode(ExecutableAnswer.idTokenType, forKey: .subjectTokenType)
        try container.encode(tokenURL, forKey: .tokenURL)
        var source = container.nestedContainer(keyedBy: SourceKeys.self, forKey: .credentialSource)
        var executable = source.nestedContainer(keyedBy: ExecutableKeys.self, forKey: .executable)
        try executable.encode(command, forKey: .command)
        try executable.encode(30_000, forKey: .timeoutMillis)
        try container.encodeIfPresent(impersonationURL, forKey: .impersonationURL)
    }
}
