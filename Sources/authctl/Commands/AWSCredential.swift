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
            `authctl aws-credential setup PROFILE --role-arn ARN` makes the AWS profile PROFILE (the \
            section [profile PROFILE] of AWS_CONFIG_FILE, else ~/.aws/config; [default] for default) \
            run this authctl as its credential_process, with the options given, keeping every other \
            line of the file. The aws command and the SDKs then run `authctl --service SERVICE \
            aws-credential --role-arn ARN`, which prints the JSON credential_process reads: \
            credentials that STS's AssumeRoleWithWebIdentity gives for the session's verified ID \
            token (refreshed first when due, as `authctl token --id-token` refreshes it). They are \
            kept in the keyring (one item per service, account and role; never in a file) and \
            printed again while more than 5 minutes are left, so any number of aws processes at \
            once make one STS request; signing out deletes them.
            STS is --sts-endpoint URL, else https://sts.REGION.amazonaws.com/ for --region, \
            AWS_REGION or AWS_DEFAULT_REGION, else https://sts.amazonaws.com/. The role's trust \
            policy must accept the OpenID provider's issuer as a federated principal, with the \
            client id as the audience.
            It needs a service bound to an OpenID provider (else exit 65), never prompts, never \
            opens a browser and never reads standard input. Nobody signed in: exit 1. An ID token \
            STS refuses (after one refresh) or AccessDenied: 77; another STS error: 69; an answer \
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

    /// The options that say which role, and how: read by ArgumentParser or by ``FastPath``.
    struct Options {
        /// Their names, each followed by its value.
        static let names = ["--role-arn", "--duration", "--session-name", "--region", "--sts-endpoint"]

        var roleARN: String
        var duration: Int?
        var sessionName: String?
        var region: String?
        var stsEndpoint: String?

        /// The options ``FastPath`` read, as name and value; `nil` without `--role-arn` or with a
        /// duration that is not plain digits (ArgumentParser then says what is wrong).
        init?(_ pairs: [(name: String, value: String)]) {
            func value(_ name: String) -> String? { pairs.first { $0.name == name }?.value }
            guard let roleARN = value("--role-arn") else { return nil }
            if let duration = value("--duration") {
                guard (1...9).contains(duration.utf8.count), duration.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
                self.duration = Int(duration)
            }
            self.roleARN = roleARN
            sessionName = value("--session-name")
            region = value("--region")
            stsEndpoint = value("--sts-endpoint")
        }

        init(roleARN: String, duration: Int?, sessionName: String?, region: String?, stsEndpoint: String?) {
            (self.roleARN, self.duration, self.sessionName, self.region, self.stsEndpoint) = (roleARN, duration, sessionName, region, stsEndpoint)
        }

        /// The role, checked: every option is checked before anything is asked or written.
        /// `region` is the option's, else the environment's when `inheritingRegion`.
        func role(inheritingRegion: Bool) throws(AuthError) -> AuthController.AWSRole {
            let region = inheritingRegion ? region ?? ProcessEnvironment.value("AWS_REGION") ?? ProcessEnvironment.value("AWS_DEFAULT_REGION") : region
            return try AuthController.AWSRole(arn: roleARN, duration: duration, sessionName: sessionName, region: region, stsEndpoint: stsEndpoint)
        }
    }

    private var options: Options {
        Options(roleARN: roleARN, duration: duration, sessionName: sessionName, region: region, stsEndpoint: stsEndpoint)
    }

    private func answer() async throws {
        try await Self.answer(global.settings, options)
    }

    /// The credential_process itself; also for ``FastPath``.
    static func answer(_ global: GlobalSettings, _ options: Options) async throws {
        let role = try options.role(inheritingRegion: true)
        // Never the unlock prompt: an aws command may run with nobody at the screen.
        var settings = global
        settings.noPrompt = true
        let controller = try settings.makeController()
        let credentials = try await FirstSignal.deferred { () async throws(AuthError) in
            try await controller.awsCredentials(for: role)
        }
        try Output.json(ProcessCredentials(credentials))
    }

    private func setUp(_ profile: String) async throws {
        _ = try options.role(inheritingRegion: false)
        let controller = try global.makeController()
        // Refused before anything changes: only an OpenID provider's session has an ID token for STS.
        guard let binding = try controller.binding(), binding.tokenProtocol == .oidc else {
            throw AuthError.invalidInput("\(controller.service) is not bound to an OpenID provider, so it has no ID token to give STS; bind one with `authctl server set URL --protocol oidc`")
        }
        guard let binary = ProcessEnvironment.executablePath else {
            throw AuthError.unavailable("cannot tell where this authctl is (/proc/self/exe); the AWS tools need its absolute path")
        }
        var words = [binary, "--service", controller.service.rawValue, "aws-credential", "--role-arn", roleARN]
        if let duration { words += ["--duration", String(duration)] }
        if let sessionName { words += ["--session-name", sessionName] }
        if let region { words += ["--region", region] }
        if let stsEndpoint { words += ["--sts-endpoint", stsEndpoint] }
        // One line of the config file, read back as these words: no line break, no control
        // character, and text that is UTF-8 (an undecodable byte was read as U+FFFD).
        if let word = words.first(where: { $0.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F || $0 == "\u{FFFD}" } }) {
            throw AuthError.unavailable("cannot write '\(Output.escapingControlCharacters(word))' into a credential_process line the AWS tools read back: it has a line break, a control character or bytes that are not UTF-8; run an authctl installed at a plain path")
        }
        let path = try AWSConfiguration.path()
        _ = try await FirstSignal.deferred { () async throws(AuthError) in
            try AWSConfiguration.set("credential_process", to: words.map(Self.quoted).joined(separator: " "), profile: profile, in: path)
        }
        try Output.line("The AWS profile \(profile) now gets credentials for \(roleARN) from \(controller.service).")
    }

    /// A word as the AWS tools split `credential_process` (POSIX shell words, `shlex.split`): in
    /// double quotes, with `"` and `\` escaped (the only escapes inside them), when it holds a
    /// blank or a character that would split, quote or escape it.
    static func quoted(_ word: String) -> String {
        guard word.contains(where: { " \t\n\r\"'\\".contains($0) }) else { return word }
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
