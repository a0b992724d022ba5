// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthControllerCore

/// `authctl aws-credential --role-arn ARN …`: AWS's `credential_process`, answering with
/// credentials STS gives for the session's ID token; `aws-credential setup PROFILE …` names it
/// in the AWS config file.
struct AWSCredential: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "aws-credential",
        abstract: "Give AWS's tools credentials for a role, from the session's ID token (a credential_process).",
        discussion: """
            `authctl aws-credential setup PROFILE --role-arn ARN` makes the AWS profile PROFILE (the \\
            section [profile PROFILE] of AWS_CONFIG_FILE, else ~/.aws/config; [default] for default) \\
            run this authctl as its credential_process, with the options given, keeping every other \\
            line of the file. The aws command and the SDKs then run `authctl --service SERVICE \\
            aws-credential --role-arn ARN`, which prints the JSON credential_process reads: \\
            credentials that STS's AssumeRoleWithWebIdentity gives for the session's verified ID \\
            token (refreshed first when due, as `authctl token --id-token` refreshes it). They are \\
            kept in the keyring (one item per service, account and role; never in a file) and \\
            printed again while more than 5 minutes are left, so any number of aws processes at \\
            once make one STS request; signing out deletes them.
            STS is --sts-endpoint URL, else https://sts.REGION.amazonaws.com/ for --region, \\
            AWS_REGION or AWS_DEFAULT_REGION, else https://sts.amazonaws.com/. The role's trust \\
            policy must accept the OpenID provider's issuer as a federated principal, with the \\
            client id as the audience.
            It needs a service bound to an OpenID provider (else exit 65), never prompts, never \\
            opens a browser and never reads standard input. Nobody signed in: exit 1. An ID token \\
            STS refuses (after one refresh) or AccessDenied: 77; another STS error: 69; an answer \\
            that is not STS's: 76.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: ArgumentHelp("setup, to name this credential_process in the AWS config file.", valueName: "operation"))
    var operation: String?

    @Argument(help: ArgumentHelp("For setup: the AWS profile.", valueName: "profile"))
    var profile: String?

    @Option(name: .customLong("role-arn"), help: ArgumentHelp("The IAM role to assume (arn:aws:iam::ACCOUNT:role/NAME).", valueName: "arn"))
    var roleARN: String

    @Option(help: ArgumentHelp("How long the credentials last, 900 to 43200 seconds.", valueName: "seconds"))
    var duration: Int?

    @Option(name: .customLong("session-name"), help: ArgumentHelp("The role session's name (default: from the account id).", valueName: "name"))
    var sessionName: String?

    @Option(help: ArgumentHelp("The AWS region whose STS is asked.", valueName: "region"))
    var region: String?

    @Option(name: .customLong("sts-endpoint"), help: ArgumentHelp("The STS endpoint to ask instead.", valueName: "url"))
    var stsEndpoint: String?

    func validate() throws {
        guard let operation else { return }
        guard operation == "setup" else { throw ValidationError("the only operation is setup; without one, the credentials are printed") }
        guard let profile else { throw ValidationError("setup needs the AWS profile") }
        guard AWSConfiguration.isProfileName(profile) else {
            throw ValidationError("the AWS profile may hold letters, digits and . _ - @ + = , only, and not start with '-'")
        }
    }

    func run() async throws {
        if operation == "setup" {
            try await setUp(profile!)
        } else {
            try await answer()
        }
    }

    /// The role, checked: every option is checked before anything is asked or written.
    private func role(region: String?) throws(AuthError) -> AuthController.AWSRole {
        try AuthController.AWSRole(arn: roleARN, duration: duration, sessionName: sessionName, region: region, stsEndpoint: stsEndpoint)
    }

    private func answer() async throws {
        let role = try role(region: region ?? ProcessEnvironment.value("AWS_REGION") ?? ProcessEnvironment.value("AWS_DEFAULT_REGION"))
        // Never the unlock prompt: an aws command may run with nobody at the screen.
        var settings = global.settings
        settings.noPrompt = true
        let controller = try settings.makeController()
        let credentials = try await FirstSignal.deferred { () async throws(AuthError) in
            try await controller.awsCredentials(for: role)
        }
        try Output.json(ProcessCredentials(credentials))
    }

    private func setUp(_ profile: String) async throws {
        _ = try role(region: region)
        let controller = try global.makeController()
        // Refused before anything changes: only an OpenID provider's session has an ID token for STS.
        guard let binding = try controller.binding(), binding.tokenProtocol == .oidc else {
            throw AuthError.invalidInput("\(controller.service) is not bound to an OpenID provider, so it has no ID token to give STS; bind one with `authctl server set URL --protocol oidc`")
        }
        guard let binary = ProcessEnvironment.executablePath else {
            throw AuthError.unavailable("cannot tell where this authctl is (/proc/self/exe); the AWS tools need its absolute path")
        }
        var words = [Self.quoted(binary), "--service", controller.service.rawValue, "aws-credential", "--role-arn", roleARN]
        if let duration { words += ["--duration", String(duration)] }
        if let sessionName { words += ["--session-name", sessionName] }
        if let region { words += ["--region", region] }
        if let stsEndpoint { words += ["--sts-endpoint", stsEndpoint] }
        let path = AWSConfiguration.path
        try await FirstSignal.deferred { () async throws(AuthError) in
            try AWSConfiguration.set("credential_process", to: words.joined(separator: " "), profile: profile, in: path)
        }
        try Output.line("The AWS profile \(profile) now gets credentials for \(roleARN) from \(controller.service).")
    }

    /// A word as the AWS tools split `credential_process` (POSIX shell words): in double quotes,
    /// with `"` and `\` escaped, when it holds a space or a character that would split or quote it.
    static func quoted(_ word: String) -> String {
        guard word.contains(where: { " \t\n\"'\\".contains($0) }) else { return word }
        return "\"" + word.replacing("\\", with: "\\\\").replacing("\"", with: "\\\"") + "\""
    }
}

/// What `credential_process` prints: `{"Version":1,"AccessKeyId":…,"SecretAccessKey":…,
/// "SessionToken":…,"Expiration":…}`, the expiry in RFC 3339, UTC, whole seconds.
private struct ProcessCredentials: Encodable {
    let credentials: AuthController.AWSCredentials

    init(_ credentials: AuthController.AWSCredentials) { self.credentials = credentials }

    private enum CodingKeys: String, CodingKey { case version = "Version", accessKeyID = "AccessKeyId", secretAccessKey = "SecretAccessKey",
                                                      sessionToken = "SessionToken", expiration = "Expiration" }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(1, forKey: .version)
        try container.encode(credentials.accessKeyID, forKey: .accessKeyID)
        try container.encode(credentials.secretAccessKey, forKey: .secretAccessKey)
        try container.encode(credentials.sessionToken, forKey: .sessionToken)
        try container.encode(Timestamp.rfc3339(credentials.expiresAt), forKey: .expiration)
    }
}
