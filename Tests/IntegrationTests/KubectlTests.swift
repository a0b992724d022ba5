// SPDX-License-Identifier: Apache-2.0
import DesktopSandbox
import Foundation
import TestSupport
import Testing

/// `authctl kube-credential` as kubectl runs it: the real kubectl 1.20 (Debian's) against a test API
/// server over HTTPS that takes only the real identity provider's ID tokens (or, asked to, the
/// access tokens its userinfo accepts) — Support/KubeAPIServer.swift.
@Suite("kubectl with the session: kube-credential")
struct KubectlTests {
    /// A signed-in session (Ada, browser flow: it brings an ID token), an API server, and a kubectl whose kubeconfig has the
    /// cluster and a context for the user `corp`, which `kube-credential setup` then writes.
    private struct Setting {
        let provider: IdentityProvider
        let server: KubeAPIServer
        let scenario: Scenario
        let kubectl: Kubectl
    }

    private func signedIn(tokenLifetime: Duration = .seconds(300), accessTokens: Bool = false, settingUp: [String]? = []) async throws -> Setting {
        let provider = try await IdentityProvider(accessTokenLifetime: tokenLifetime, idTokenLifetime: tokenLifetime, completeDiscovery: true)
        let server = accessTokens ? try await KubeAPIServer(userinfo: provider.userinfoEndpoint)
                                  : try await KubeAPIServer(trusting: provider, audience: IdentityProvider.browserClientID)
        var scenario = try await Scenario()
        // What kubectl passes on to its plugin: the sandbox's bus and keyring, and the settings.
        var reach = scenario.sandbox.environment
        reach["XDG_CONFIG_HOME"] = scenario.configHome
        let kubectl = try Kubectl(extraEnvironment: reach)
        try kubectl.writeConfig(for: server, credential: .none)
        let folder = URL(fileURLWithPath: kubectl.path).deletingLastPathComponent().path
        scenario.extraEnvironment["PATH"] = folder + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        scenario.extraEnvironment["HOME"] = kubectl.home.path
        scenario.extraEnvironment["KUBECONFIG"] = kubectl.kubeconfig.path
        try await scenario.signInWithBrowser(at: provider)
        if let settingUp {
            let setup = try await scenario.authctl(["kube-credential", "setup", "test-user"] + settingUp)
            #expect(setup.status == 0, "\(setup)")
        }
        return Setting(provider: provider, server: server, scenario: scenario, kubectl: kubectl)
    }

    /// The kubeconfig as kubectl reads it, as JSON.
    private func view(_ kubectl: Kubectl) async throws -> [String: Any] {
        let run = try await kubectl.run("config", "view", "--raw", "-o", "json")
        try #require(run.status == 0, "\(run)")
        return try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
    }

    /// The `exec` of a kubeconfig user.
    private func exec(of user: String, in kubectl: Kubectl) async throws -> [String: Any]? {
        let users = try await view(kubectl)["users"] as? [[String: Any]] ?? []
        return (users.first { $0["name"] as? String == user }?["user"] as? [String: Any])?["exec"] as? [String: Any]
    }

    /// The claims of a JWT's payload.
    private func claims(of token: String) throws -> [String: Any] {
        var payload = String(token.split(separator: ".")[1]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        payload += String(repeating: "=", count: (4 - payload.count % 4) % 4)
        let data = try #require(Data(base64Encoded: payload))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test("setup writes the user's exec plugin through kubectl config, keeping the rest; twice leaves the same bytes")
    func setup() async throws {
        let setting = try await signedIn()
        let exec = try #require(try await exec(of: "test-user", in: setting.kubectl))
        #expect(exec["command"] as? String == Scenario.binary)
        #expect(exec["args"] as? [String] == ["--service", setting.scenario.service, "kube-credential"])
        #expect(exec["apiVersion"] as? String == "client.authentication.k8s.io/v1beta1")
        let view = try await view(setting.kubectl)
        #expect((view["clusters"] as? [[String: Any]])?.map { $0["name"] as? String } == ["test-cluster"])
        #expect(view["current-context"] as? String == "test")
        let users = view["users"] as? [[String: Any]] ?? []
        #expect(((users.first?["user"] as? [String: Any])?["username"]) == nil, "the placeholder is gone: \(users)")

        // A user the file does not have yet (kubectl 1.20 panics on set-credentials for one).
        let new = try await setting.scenario.authctl("kube-credential", "setup", "ada.lovelace@corp")
        #expect(new.status == 0, "\(new)")
        let added = try #require(try await self.view(setting.kubectl)["users"] as? [[String: Any]])
        #expect(added.map { $0["name"] as? String } == ["ada.lovelace@corp", "test-user"])
        let user = try #require(added.first?["user"] as? [String: Any])
        #expect(user["username"] == nil, "\(user)")
        #expect((user["exec"] as? [String: Any])?["command"] as? String == Scenario.binary)

        let once = try Data(contentsOf: setting.kubectl.kubeconfig)
        for name in ["test-user", "ada.lovelace@corp"] {
            let again = try await setting.scenario.authctl("kube-credential", "setup", name)
            #expect(again.status == 0, "\(again)")
        }
        #expect(try Data(contentsOf: setting.kubectl.kubeconfig) == once)
    }

    @Test("an existing user's static token, user name and password go, as kubectl would send them instead of running the plugin")
    func competingCredentials() async throws {
        let setting = try await signedIn(settingUp: nil)
        for (field, value) in [("token", "OLD-STATIC-TOKEN"), ("username", "bob"), ("password", "pw")] {
            let set = try await setting.kubectl.run("config", "set", "users.test-user.\(field)", value)
            #expect(set.status == 0, "\(set)")
        }
        let setup = try await setting.scenario.authctl("kube-credential", "setup", "test-user")
        #expect(setup.status == 0, "\(setup)")
        let users = try #require(try await view(setting.kubectl)["users"] as? [[String: Any]])
        let user = try #require(users.first { $0["name"] as? String == "test-user" }?["user"] as? [String: Any])
        #expect(user["token"] == nil && user["username"] == nil && user["password"] == nil, "\(user)")
        let run = try await setting.kubectl.run("get", "namespaces", "-o", "name")
        #expect(run.status == 0, "\(run)")
        let stats = try await setting.server.stats()
        #expect(stats.unauthorized == 0)
        #expect(stats.kinds.idToken == stats.requests)
    }

    @Test("kubectl lists the namespaces with the session's ID token, verified by the API server against the provider's keys")
    func idToken() async throws {
        let setting = try await signedIn()
        let run = try await setting.kubectl.run("get", "namespaces", "-o", "name")
        #expect(run.status == 0, "\(run)")
        #expect(run.output == "namespace/default\nnamespace/kube-system")
        let idToken = try await setting.scenario.authctl("token", "--id-token").output
        let stats = try await setting.server.stats()
        #expect(stats.unauthorized == 0)
        #expect(stats.kinds.idToken == stats.requests)
        #expect(stats.tokens == [KubeAPIServer.fingerprint(of: idToken)])
    }

    @Test("with --access-token, the access token, for a server that asks the provider's userinfo")
    func accessToken() async throws {
        let setting = try await signedIn(accessTokens: true, settingUp: ["--access-token"])
        #expect(try await exec(of: "test-user", in: setting.kubectl)?["args"] as? [String]
                == ["--service", setting.scenario.service, "kube-credential", "--access-token"])
        let run = try await setting.kubectl.run("get", "namespaces", "-o", "name")
        #expect(run.status == 0, "\(run)")
        let stats = try await setting.server.stats()
        #expect(stats.kinds.accessToken == stats.requests)
        #expect(stats.tokens == [KubeAPIServer.fingerprint(of: try await setting.scenario.authctl("token").output)])
    }

    @Test("the answer is in the version KUBERNETES_EXEC_INFO asks for, with the ID token's expiry by the local clock",
          arguments: ["client.authentication.k8s.io/v1beta1", "client.authentication.k8s.io/v1"])
    func answer(version: String) async throws {
        let setting = try await signedIn(settingUp: nil)
        var scenario = setting.scenario
        scenario.extraEnvironment["KUBERNETES_EXEC_INFO"] = #"{"kind":"ExecCredential","apiVersion":"\#(version)","spec":{"interactive":false}}"#
        let run = try await scenario.authctl("kube-credential")
        #expect(run.status == 0, "\(run)")
        #expect(run.stderr.isEmpty, "\(run)")
        let answer = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
        #expect(answer["apiVersion"] as? String == version)
        #expect(answer["kind"] as? String == "ExecCredential")
        let status = try #require(answer["status"] as? [String: Any])
        let token = try #require(status["token"] as? String)
        #expect(token == (try await scenario.authctl("token", "--id-token").output))
        let expiry = try #require(claims(of: token)["exp"] as? Int)
        let stamp = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(expiry)))
        #expect(status["expirationTimestamp"] as? String == stamp)
    }

    @Test("twelve kubectl at once over an expired token: one refresh at the provider, and every one lists the namespaces")
    func concurrentRefresh() async throws {
        let setting = try await signedIn(tokenLifetime: .seconds(4))
        let refreshesBefore = try await setting.provider.count("refresh")
        // Until the tokens have expired by the local clock.
        let expired = await eventually(within: .seconds(30), pollingEvery: .milliseconds(200)) {
            guard let status = try? await setting.scenario.authctl("status", "--json").stdout,
                  let object = try? JSONSerialization.jsonObject(with: Data(status.utf8)) as? [String: Any],
                  let expiry = (object["accessTokenExpiresAt"] as? String).flatMap(ISO8601DateFormatter().date(from:)) else { return false }
            return expiry < Date()
        }
        try #require(expired)
        // The refresh's tokens outlive the twelve, however slow the machine: each finds them fresh.
        try await setting.provider.configure(["ACCESS_TOKEN_EXPIRE_SECONDS": 300, "ID_TOKEN_EXPIRE_SECONDS": 300])
        let runs = try await withThrowingTaskGroup(of: Run.self) { group in
            for _ in 0..<12 { group.addTask { try await setting.kubectl.run("get", "namespaces", "-o", "name") } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        for run in runs { #expect(run.status == 0, "\(run)") }
        #expect(try await setting.provider.count("refresh") == refreshesBefore + 1)
        #expect(try await setting.server.stats().unauthorized == 0)
    }

    @Test("nobody signed in: exit 1, nothing on stdout, and kubectl shows the sign-in to run")
    func nobodySignedIn() async throws {
        let setting = try await signedIn()
        #expect(try await setting.scenario.authctl("sign-out").status == 0)
        let direct = try await setting.scenario.authctl("kube-credential")
        #expect(direct.status == 1, "\(direct)")
        #expect(direct.stdout.isEmpty)
        let line = "`authctl --service \(setting.scenario.service) sign-in`"
        #expect(direct.stderr.split(separator: "\n").count == 1 && direct.stderr.contains(line), "\(direct)")
        let run = try await setting.kubectl.run("get", "namespaces", "-o", "name")
        #expect(run.status == 1)
        #expect(run.stderr.contains(line), "\(run)")
        #expect(try await setting.server.stats().requests == 0)
    }

    @Test("a service that issues no verified ID token needs --access-token (65)")
    func noIDToken() async throws {
        let scenario = try await Scenario()
        #expect(try await scenario.authctl("server", "set", "https://tokens.example.org/token", "--protocol", "oauth2").status == 0)
        let run = try await scenario.authctl("kube-credential")
        #expect(run.status == 65, "\(run)")
        #expect(run.stdout.isEmpty)
        #expect(run.stderr.contains("--access-token"), "\(run)")
    }

    @Test("KUBERNETES_EXEC_INFO of another version, or not kubectl's JSON: 65 and nothing on stdout",
          arguments: [#"{"apiVersion":"client.authentication.k8s.io/v1alpha1"}"#, #"{"kind":"ExecCredential"}"#, "{", "x\u{7}y"])
    func badExecInfo(_ value: String) async throws {
        var setting = try await signedIn(settingUp: nil).scenario
        setting.extraEnvironment["KUBERNETES_EXEC_INFO"] = value
        let run = try await setting.authctl("kube-credential")
        #expect(run.status == 65, "\(run)")
        #expect(run.stdout.isEmpty)
        #expect(run.stderr.split(separator: "\n").count == 1, "\(run)")
    }

    @Test("setup refuses an unbound service (65), and kubectl missing or failing (69), leaving the kubeconfig as it was")
    func setupRefusals() async throws {
        let setting = try await signedIn(settingUp: nil)
        let before = try Data(contentsOf: setting.kubectl.kubeconfig)
        var unbound = try await Scenario()
        unbound.extraEnvironment = setting.scenario.extraEnvironment
        let refused = try await unbound.authctl("kube-credential", "setup", "test-user")
        #expect(refused.status == 65, "\(refused)")

        var missing = setting.scenario
        missing.extraEnvironment["PATH"] = "/nonexistent"
        let noKubectl = try await missing.authctl("kube-credential", "setup", "test-user")
        #expect(noKubectl.status == 69, "\(noKubectl)")
        #expect(noKubectl.stderr.contains("kubectl"), "\(noKubectl)")

        // A kubeconfig kubectl cannot parse: kubectl fails, and the file is as it was.
        var broken = setting.scenario
        let garbage = setting.kubectl.home.appendingPathComponent("broken")
        try Data("clusters: [unclosed\n".utf8).write(to: garbage)
        broken.extraEnvironment["KUBECONFIG"] = garbage.path
        let failed = try await broken.authctl("kube-credential", "setup", "test-user")
        #expect(failed.status == 69, "\(failed)")
        #expect(try Data(contentsOf: garbage) == Data("clusters: [unclosed\n".utf8))

        #expect(try Data(contentsOf: setting.kubectl.kubeconfig) == before)
        let user = try await setting.scenario.authctl("kube-credential", "setup", "-bad")
        #expect(user.status == 64, "\(user)")
    }
}
