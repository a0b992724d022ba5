// SPDX-License-Identifier: Apache-2.0
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TestSupport
import Testing

/// AWS and Google Cloud from the session, as their own clients run authctl: Debian's `aws` (and
/// boto3) with `credential_process` against moto's STS (Support/clouds/sts_server.py, which records each
/// request), and google-auth with an executable-sourced credential against an RFC 8693 token
/// exchange that verifies the ID token with the real provider's keys (Support/clouds/google_sts.py).
@Suite("AWS and Google Cloud: aws-credential and gcloud-credential")
struct CloudTests {
    static let role = "arn:aws:iam::123456789012:role/developer"

    /// A signed-in session (Ada, browser flow: it brings an ID token), STS, and an AWS config file
    /// of the test's own.
    private struct Setting {
        let provider: IdentityProvider
        let sts: STSServer
        var scenario: Scenario
        let home: URL

        var configFile: URL { home.appendingPathComponent(".aws/config") }

        /// What `aws` and boto3 run with: the session's bus and settings, the config file, and no
        /// credentials or instance metadata of the machine's.
        var environment: [String: String] {
            var environment = scenario.environment
            for key in environment.keys where key.hasPrefix("AWS_") { environment.removeValue(forKey: key) }
            environment["HOME"] = home.path
            environment["AWS_CONFIG_FILE"] = configFile.path
            environment["AWS_SHARED_CREDENTIALS_FILE"] = home.appendingPathComponent(".aws/credentials").path
            environment["AWS_EC2_METADATA_DISABLED"] = "true"
            environment["AWS_PAGER"] = ""
            return environment
        }

        /// `aws sts get-caller-identity` with `profile`: its JSON answer, or the run when it failed.
        func callerIdentity(profile: String = "dev") async throws -> (arn: String?, run: Run) {
            let run = try await runProcess("/usr/bin/aws", ["sts", "get-caller-identity", "--profile", profile, "--region", "us-east-1",
                                                            "--endpoint-url", sts.url, "--output", "json"],
                                           input: nil, environment: environment, timeout: 120)
            let answer = try? JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any]
            return (answer?["Arn"] as? String, run)
        }
    }

    private func signedIn(idTokenLifetime: Duration = .seconds(600)) async throws -> Setting {
        let provider = try await IdentityProvider(idTokenLifetime: idTokenLifetime, completeDiscovery: true)
        let sts = try await STSServer()
        var scenario = try await Scenario()
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("aws-home-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        scenario.extraEnvironment["HOME"] = home.path
        try await scenario.signInWithBrowser(at: provider)
        return Setting(provider: provider, sts: sts, scenario: scenario, home: home)
    }

    /// The session's ID token, as `token --id-token` prints it.
    private func idToken(_ scenario: Scenario) async throws -> String {
        let run = try await scenario.authctl("token", "--id-token")
        try #require(run.status == 0, "\(run)")
        return run.output
    }

    @Test("setup writes credential_process into the profile, keeping every other byte; aws and boto3 then assume the role with the session's verified ID token, and twenty aws at once make one STS request")
    func awsCLI() async throws {
        var setting = try await signedIn()
        try FileManager.default.createDirectory(at: setting.configFile.deletingLastPathComponent(), withIntermediateDirectories: true)
        let before = "# the team's profiles\r\n[default]\r\nregion = eu-west-1\r\n\r\n[profile  dev]\r\noutput = json\r\ns3 =\r\n  max_concurrent_requests = 4\r\n; keep\r\n[sso-session corp]\r\nsso_region = eu-west-1\r\n"
        try Data(before.utf8).write(to: setting.configFile)
        let setup = try await setting.scenario.authctl("aws-credential", "setup", "dev", "--role-arn", Self.role, "--sts-endpoint", setting.sts.url)
        try #require(setup.status == 0, "\(setup)")
        let command = "\(Scenario.binary) --service \(setting.scenario.service) aws-credential --role-arn \(Self.role) --sts-endpoint \(setting.sts.url)"
        let written = try String(contentsOf: setting.configFile, encoding: .utf8)
        #expect(written == before.replacingOccurrences(of: "s3 =\r\n  max_concurrent_requests = 4\r\n",
                                                       with: "s3 =\r\n  max_concurrent_requests = 4\r\ncredential_process = \(command)\r\n"))
        let again = try await setting.scenario.authctl("aws-credential", "setup", "dev", "--role-arn", Self.role, "--sts-endpoint", setting.sts.url)
        #expect(again.status == 0, "\(again)")
        #expect(try String(contentsOf: setting.configFile, encoding: .utf8) == written, "twice gives the same bytes")

        let identity = try await setting.callerIdentity()
        #expect(identity.arn?.hasPrefix("arn:aws:sts::123456789012:assumed-role/developer/") == true, "\(identity.run)")
        let token = try await idToken(setting.scenario)
        var assumed = try await setting.sts.assumeRoleRequests()
        try #require(assumed.count == 1, "\(assumed)")
        #expect(assumed[0]["WebIdentityToken"] == token, "STS got the session's ID token")
        #expect(assumed[0]["RoleArn"] == Self.role && assumed[0]["Version"] == "2011-06-15")
        let account = try await setting.scenario.authctl("whoami")
        #expect(assumed[0]["RoleSessionName"] == account.output, "the account id is the session's name: \(account)")

        // boto3, the SDK the same profile serves: the credentials kept, no new request.
        let boto = try await runProcess(try CloudClients.python(), [CloudClients.script, "boto3", "dev", setting.sts.url],
                                        input: nil, environment: setting.environment, timeout: 120)
        #expect(boto.status == 0 && boto.output.hasPrefix("arn:aws:sts::123456789012:assumed-role/developer/"), "\(boto)")
        #expect(try await setting.sts.assumeRoleRequests().count == 1)

        // Twenty at once, after the kept credentials are gone: one STS request.
        let signOut = try await setting.scenario.authctl("sign-out")
        #expect(signOut.status == 0, "\(signOut)")
        try await setting.scenario.signInWithBrowser(at: setting.provider)
        let signedInAgain = setting
        let twenty = try await withThrowingTaskGroup(of: String?.self) { group in
            for _ in 0..<20 { group.addTask { try await signedInAgain.callerIdentity().arn } }
            return try await group.reduce(into: [String?]()) { $0.append($1) }
        }
        #expect(twenty.allSatisfy { $0?.contains(":assumed-role/developer/") == true }, "\(twenty)")
        assumed = try await setting.sts.assumeRoleRequests()
        #expect(assumed.count == 2, "twenty aws at once made \(assumed.count - 1) STS requests")
    }

    @Test("kept until 5 minutes before they expire by STS's clock, then asked once; an ID token STS calls expired is refreshed once; sign-out deletes them")
    func keptAndAskedAgain() async throws {
        var setting = try await signedIn()
        let arguments = ["aws-credential", "--role-arn", Self.role, "--sts-endpoint", setting.sts.url]
        func credentials() async throws -> [String: Any] {
            let run = try await setting.scenario.authctl(arguments)
            try #require(run.status == 0, "\(run)")
            return try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
        }
        // STS's clock 3500 s ahead: its credentials of an hour have 100 s left by the local clock.
        try await setting.sts.setClock(offset: 3500)
        let first = try await credentials()
        #expect(first["Version"] as? Int == 1 && (first["AccessKeyId"] as? String)?.isEmpty == false)
        let expiration = try #require(first["Expiration"] as? String)
        let expiresAt = try #require(ISO8601DateFormatter().date(from: expiration))
        #expect(abs(expiresAt.timeIntervalSinceNow - 100) < 60, "by the local clock: \(expiration)")
        _ = try await credentials()
        #expect(try await setting.sts.assumeRoleRequests().count == 2, "due credentials are asked for again")
        try await setting.sts.setClock(offset: 0)
        let fresh = try await credentials()
        let kept = try await credentials()
        #expect(kept["AccessKeyId"] as? String == fresh["AccessKeyId"] as? String)
        #expect(try await setting.sts.assumeRoleRequests().count == 3, "fresh credentials are kept")

        // The keyring item, by its attributes.
        let item = try await setting.scenario.secretTool("search", "--all", "service", setting.scenario.service, "aws-role", Self.role)
        #expect((item.stdout + item.stderr).contains("attribute.aws-role = \(Self.role)"), "\(item)")

        // An ID token STS calls expired: refreshed once, and asked again with the new one.
        let before = try await idToken(setting.scenario)
        let signOutAndIn = try await setting.scenario.authctl("sign-out")
        #expect(signOutAndIn.status == 0)
        try await setting.scenario.signInWithBrowser(at: setting.provider)
        try await setting.sts.refuseNext(code: "ExpiredTokenException", count: 1)
        _ = try await credentials()
        let asked = try await setting.sts.assumeRoleRequests().suffix(2)
        #expect(asked.count == 2 && asked.first?["WebIdentityToken"] != asked.last?["WebIdentityToken"], "asked again with a refreshed ID token")
        #expect(asked.last?["WebIdentityToken"] == (try await idToken(setting.scenario)) && asked.last?["WebIdentityToken"] != before)

        // Refused twice: 77, and nothing is kept.
        let signOut = try await setting.scenario.authctl("sign-out")
        #expect(signOut.status == 0, "\(signOut)")
        let gone = try await setting.scenario.secretTool("search", "--all", "aws-role", Self.role, "service", setting.scenario.service)
        #expect(!(gone.stdout + gone.stderr).contains("attribute.aws-role"), "sign-out deleted them: \(gone)")
        let nobody = try await setting.scenario.authctl(arguments)
        #expect(nobody.status == 1 && nobody.stderr.contains("sign-in"), "\(nobody)")
        try await setting.scenario.signInWithBrowser(at: setting.provider)
        try await setting.sts.refuseNext(code: "InvalidIdentityToken", count: 2)
        let refused = try await setting.scenario.authctl(arguments)
        #expect(refused.status == 77 && refused.stderr.contains("InvalidIdentityToken"), "\(refused)")
        #expect(!refused.stderr.contains(try await idToken(setting.scenario)), "no token in a message")
    }

    @Test("the endpoint: --region, else AWS_REGION, else AWS_DEFAULT_REGION names sts.REGION.amazonaws.com, reached through https_proxy; --duration and --session-name reach STS; a slow STS is 75 at --server-timeout and nothing is kept; forget and a session's end delete what is")
    func endpointOptionsAndEnds() async throws {
        var setting = try await signedIn()
        // Through a proxy that resolves nothing but localhost: the host authctl asks it to
        // tunnel to is the endpoint it chose, and the failure names the proxy (69).
        // Ten set-ups at once, each for a profile of its own: every one is in the file.
        try FileManager.default.createDirectory(at: setting.configFile.deletingLastPathComponent(), withIntermediateDirectories: true)
        let profiles = (0..<10).map { "p\($0)" }
        let scenario = setting.scenario
        let setups = try await withThrowingTaskGroup(of: Run.self) { group in
            for profile in profiles {
                group.addTask { try await scenario.authctl("aws-credential", "setup", profile, "--role-arn", Self.role) }
            }
            return try await group.reduce(into: [Run]()) { $0.append($1) }
        }
        #expect(setups.allSatisfy { $0.status == 0 }, "\(setups)")
        let written = try String(contentsOf: setting.configFile, encoding: .utf8)
        #expect(profiles.allSatisfy { written.components(separatedBy: "[profile \($0)]\n").count == 2 }, "\(written)")

        let hosts = setting.home.appendingPathComponent("hosts")
        try "127.0.0.1\tlocalhost\n".write(to: hosts, atomically: true, encoding: .utf8)
        let proxy = try await ForwardProxy(.tinyproxy, hosts: hosts.path)
        let cases: [(environment: [String: String], options: [String], host: String)] = [
            (["AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "ap-south-1"], [], "sts.eu-west-1.amazonaws.com:443"),
            (["AWS_REGION": "eu-west-1"], ["--region", "us-west-2"], "sts.us-west-2.amazonaws.com:443"),
            (["AWS_DEFAULT_REGION": "ap-south-1"], [], "sts.ap-south-1.amazonaws.com:443"),
            ([:], [], "sts.amazonaws.com:443"),
        ]
        for (index, example) in cases.enumerated() {
            var scenario = setting.scenario
            scenario.extraEnvironment["https_proxy"] = proxy.url()
            for (name, value) in example.environment { scenario.extraEnvironment[name] = value }
            let run = try await scenario.authctl(["aws-credential", "--role-arn", Self.role] + example.options)
            #expect(run.status == 69 && run.stderr.contains("127.0.0.1:\(proxy.port)"), "\(example): \(run)")
            let tunnelled = await eventually(within: .seconds(20)) { proxy.tunnels().count > index }
            #expect(tunnelled && proxy.tunnels().last == example.host, "\(example): \(proxy.tunnels()) \(proxy.log())")
        }
        #expect(try await setting.sts.assumeRoleRequests().isEmpty, "no request went direct to the test's STS")

        // --duration and --session-name as given.
        let arguments = ["aws-credential", "--role-arn", Self.role, "--sts-endpoint", setting.sts.url]
        let named = try await setting.scenario.authctl(arguments + ["--duration", "900", "--session-name", "ci@build=7"])
        #expect(named.status == 0, "\(named)")
        let asked = try await setting.sts.assumeRoleRequests()
        #expect(asked.last?["DurationSeconds"] == "900" && asked.last?["RoleSessionName"] == "ci@build=7", "\(asked)")
        let account = try await setting.scenario.authctl("whoami")
        // Kept credentials serve only what they were asked for: without the options, STS is
        // asked again (with the account as the session name), and those are kept in turn.
        let plain = try await setting.scenario.authctl(arguments)
        #expect(plain.status == 0, "\(plain)")
        _ = try await setting.scenario.authctl(arguments)
        let askedAgain = try await setting.sts.assumeRoleRequests()
        #expect(askedAgain.count == asked.count + 1 && askedAgain.last?["RoleSessionName"] == account.output
                    && askedAgain.last?["DurationSeconds"] == nil, "\(askedAgain)")
        let kept = try await setting.scenario.secretTool("search", "--all", "service", setting.scenario.service, "aws-role", Self.role)
        #expect((kept.stdout + kept.stderr).contains("attribute.aws-role = \(Self.role)"), "\(kept)")

        // forget deletes them.
        let forget = try await setting.scenario.authctl("forget", account.output)
        #expect(forget.status == 0, "\(forget)")
        let forgotten = try await setting.scenario.secretTool("search", "--all", "service", setting.scenario.service, "aws-role", Self.role)
        #expect(!(forgotten.stdout + forgotten.stderr).contains("attribute.aws-role"), "\(forgotten)")

        // STS slower than --server-timeout: 75 at about the deadline, nothing kept.
        try await setting.scenario.signInWithBrowser(at: setting.provider)
        try await setting.sts.slowNext(seconds: 8, count: 1)
        let slow = try await setting.scenario.authctl(["--server-timeout", "2"] + arguments)
        #expect(slow.status == 75 && slow.stderr.split(separator: "\n").count == 1, "\(slow)")
        #expect(slow.seconds < 7, "ended at the deadline, not at the answer: \(slow.seconds) s")
        let none = try await setting.scenario.secretTool("search", "--all", "service", setting.scenario.service, "aws-role", Self.role)
        #expect(!(none.stdout + none.stderr).contains("attribute.aws-role"), "\(none)")

        // The session's own item removed by another tool: the session ends ("removed") when a
        // command that uses it finds it gone (`status` only reports), and its credentials go with it.
        let again = try await setting.scenario.authctl(arguments)
        #expect(again.status == 0, "\(again)")
        let removed = try await setting.scenario.secretTool("clear", "service", setting.scenario.service, "server", setting.provider.issuer)
        #expect(removed.status == 0, "\(removed)")
        let status = try await setting.scenario.authctl("status")
        #expect(status.status == 1, "\(status)")
        let token = try await setting.scenario.authctl("token")
        #expect(token.status == 1 && token.stderr.contains("gone from the keyring"), "\(token)")
        let ended = try await setting.scenario.secretTool("search", "--all", "service", setting.scenario.service, "aws-role", Self.role)
        #expect(!(ended.stdout + ended.stderr).contains("attribute.aws-role"), "the end of the session deleted them: \(ended)")
    }

    @Test("google-auth refreshes with gcloud-credential's ID token at a token exchange that verifies it with the provider's keys; a failure's JSON reaches the library's error")
    func googleAuth() async throws {
        let setting = try await signedIn()
        let exchange = try await GoogleSTS(trusting: setting.provider)
        let file = setting.home.appendingPathComponent("gcloud/credentials.json")
        let setup = try await setting.scenario.authctl("gcloud-credential", "setup", file.path, "--audience",
                                                       "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/authctl",
                                                       "--token-url", exchange.url + "/v1/token")
        try #require(setup.status == 0, "\(setup)")
        let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let configuration = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [String: Any])
        #expect(configuration["type"] as? String == "external_account")
        #expect(configuration["subject_token_type"] as? String == "urn:ietf:params:oauth:token-type:id_token")

        var environment = setting.environment
        environment["GOOGLE_APPLICATION_CREDENTIALS"] = file.path
        environment["GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES"] = "1"
        let refreshed = try await runProcess(try CloudClients.python(), [CloudClients.script, "google-auth"], input: nil, environment: environment, timeout: 120)
        #expect(refreshed.status == 0 && refreshed.output.hasPrefix("ya29."), "\(refreshed)")
        let log = try await exchange.log()
        try #require(log.count == 1, "\(log)")
        #expect(log[0]["accepted"] as? Bool == true, "\(log)")
        #expect(log[0]["subject_token"] as? String == (try await idToken(setting.scenario)))

        // The executable's own answer: the ID token, its expiry by the local clock in whole
        // seconds, and the token type the library asked for; another type is refused (65).
        let answered = try await setting.scenario.authctl("gcloud-credential")
        let success = try #require(try JSONSerialization.jsonObject(with: Data(answered.stdout.utf8)) as? [String: Any], "\(answered)")
        #expect(success["version"] as? Int == 1 && success["success"] as? Bool == true)
        #expect(success["token_type"] as? String == "urn:ietf:params:oauth:token-type:id_token")
        #expect(success["id_token"] as? String == (try await idToken(setting.scenario)))
        let expiration = try #require(success["expiration_time"] as? Int)
        #expect(abs(Double(expiration) - Date().timeIntervalSince1970 - 600) < 120, "the ID token lives 600 s: \(expiration)")
        var asJWT = setting.scenario
        asJWT.extraEnvironment["GOOGLE_EXTERNAL_ACCOUNT_TOKEN_TYPE"] = "urn:ietf:params:oauth:token-type:jwt"
        #expect(try await asJWT.authctl("gcloud-credential").stdout.contains("\"token_type\":\"urn:ietf:params:oauth:token-type:jwt\""))
        var asSAML = setting.scenario
        asSAML.extraEnvironment["GOOGLE_EXTERNAL_ACCOUNT_TOKEN_TYPE"] = "urn:ietf:params:oauth:token-type:saml2"
        let saml = try await asSAML.authctl("gcloud-credential")
        #expect(saml.status == 65 && saml.stdout.contains("\"code\":\"UNSUPPORTED_TOKEN_TYPE\""), "\(saml)")

        // Never renamed over what is not a regular file (as root, /dev/null would be replaced).
        let fifo = setting.home.appendingPathComponent("fifo").path
        #expect(mkfifo(fifo, 0o600) == 0)
        let overFIFO = try await setting.scenario.authctl("gcloud-credential", "setup", fifo, "--audience", "a")
        #expect(overFIFO.status == 74 && overFIFO.stderr.contains("not a regular file"), "\(overFIFO)")
        var status = stat()
        #expect(lstat(fifo, &status) == 0 && status.st_mode & S_IFMT == S_IFIFO, "the FIFO is still one")

        let signOut = try await setting.scenario.authctl("sign-out")
        #expect(signOut.status == 0)
        let failed = try await runProcess(try CloudClients.python(), [CloudClients.script, "google-auth"], input: nil, environment: environment, timeout: 120)
        #expect(failed.status != 0 && failed.stderr.contains("NOT_SIGNED_IN"), "\(failed)")
        let direct = try await setting.scenario.authctl("gcloud-credential")
        #expect(direct.status == 1, "\(direct)")
        let answer = try #require(try JSONSerialization.jsonObject(with: Data(direct.stdout.utf8)) as? [String: Any])
        #expect(answer["success"] as? Bool == false && answer["code"] as? String == "NOT_SIGNED_IN" && answer["version"] as? Int == 1)
    }
}

/// moto's STS behind Support/clouds/sts_server.py.
final class STSServer: Sendable {
    private let server: ServerProcess
    var url: String { "http://127.0.0.1:\(server.port)" }

    init() async throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Support/clouds/sts_server.py").path
        server = try await ServerProcess("STS (moto)", executable: try CloudClients.python(), arguments: [script], within: .seconds(60), slow: true)
    }

    /// The form of each AssumeRoleWithWebIdentity STS was sent, in order.
    func assumeRoleRequests() async throws -> [[String: String]] {
        let requests = try await control("GET", "requests", nil) as? [[String: Any]] ?? []
        return requests.filter { $0["action"] as? String == "AssumeRoleWithWebIdentity" }.compactMap { $0["form"] as? [String: String] }
    }

    func setClock(offset seconds: Int) async throws { _ = try await control("POST", "clock", ["offset": seconds]) }

    func refuseNext(code: String, count: Int) async throws { _ = try await control("POST", "refuse", ["code": code, "count": count]) }

    func slowNext(seconds: Int, count: Int) async throws { _ = try await control("POST", "slow", ["seconds": seconds, "count": count]) }

    private func control(_ method: String, _ name: String, _ body: [String: Any]?) async throws -> Any {
        var request = URLRequest(url: URL(string: "\(url)/_control/\(name)")!)
        request.httpMethod = method
        if let body { request.httpBody = try JSONSerialization.data(withJSONObject: body) }
        let (data, _) = try await URLSession.shared.data(for: request)
        return try JSONSerialization.jsonObject(with: data)
    }
}

/// Google's token exchange, as Support/clouds/google_sts.py plays it.
final class GoogleSTS: Sendable {
    private let server: ServerProcess
    var url: String { "http://127.0.0.1:\(server.port)" }

    init(trusting provider: IdentityProvider) async throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Support/clouds/google_sts.py").path
        server = try await ServerProcess("Google token exchange", executable: try CloudClients.python(),
                                         arguments: [script, "--issuer", provider.issuer, "--jwks", provider.jwksURI,
                                                     "--audience", IdentityProvider.browserClientID],
                                         within: .seconds(60), slow: true)
    }

    func log() async throws -> [[String: Any]] {
        let (data, _) = try await URLSession.shared.data(from: URL(string: "\(url)/_log")!)
        return try JSONSerialization.jsonObject(with: data) as? [[String: Any]] ?? []
    }
}

/// The clouds' Python clients (moto, boto3, google-auth), in an environment of their own that
/// `.ci/install-python-deps` makes, and the script that runs them (Support/clouds/cloud_clients.py).
enum CloudClients {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Support/clouds/cloud_clients.py").path

    static func python() throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let python = root.appendingPathComponent(".build/clouds-venv/bin/python3").path
        guard FileManager.default.isExecutableFile(atPath: python) else {
            Issue.record("the clouds' Python environment is missing: run .ci/install-deps")
            throw CocoaError(.fileNoSuchFile)
        }
        return python
    }
}
