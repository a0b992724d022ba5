// SPDX-License-Identifier: Apache-2.0
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// A Kubernetes API server on 127.0.0.1 over HTTPS (`kube_api_server.py` beside this file),
/// started by the test that needs it and stopped with it: just enough of the API for the real
/// kubectl 1.20 to list namespaces, to whoever sends a Bearer token of the test identity
/// provider, judged at every request as kube-apiserver's authenticators judge it: an ID token
/// (RS256 by a key of the provider's JWKS, `iss` the issuer, `aud` the audience, not expired), or
/// with `userinfo` an access token the provider's userinfo endpoint accepts. Anything else gets
/// `401` and a `Status`, which kubectl reports as "You must be logged in to the server
/// (Unauthorized)". The server makes its own CA at start (`caFile`).
final class KubeAPIServer: Sendable {
    private let server: ServerProcess
    var port: Int { server.port }
    /// The folder the server writes its CA into.
    private let folder: URL

    /// Starts the server and returns once it accepts connections, at most 30 s later.
    /// - Parameters:
    ///   - issuer, jwks, audience: ID tokens are accepted from that issuer, signed with a key of
    ///     that JWKS, for that client id (kube-apiserver's `--oidc-issuer-url`, `--oidc-client-id`).
    ///     Nil `issuer`: no ID token is accepted.
    ///   - userinfo: access tokens are accepted when that endpoint answers 200 to them, asked at every
    ///     request. Nil: no access token is accepted.
    ///   - namespaces: what `kubectl get namespaces` lists.
    init(issuer: String? = nil, jwks: String? = nil, audience: String = IdentityProvider.deviceClientID, userinfo: String? = nil,
         namespaces: [String] = ["default", "kube-system"]) async throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("kube-api-server-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("kube_api_server.py").path
        var arguments = [script, "--dir", folder.path]
        if let issuer { arguments += ["--issuer", issuer, "--jwks", jwks ?? "\(issuer)/.well-known/jwks.json", "--audience", audience] }
        if let userinfo { arguments += ["--userinfo", userinfo] }
        arguments += namespaces.flatMap { ["--namespace", $0] }
        // The identity provider's Python: the server needs `cryptography` for its certificates and
        // the ID tokens' signatures.
        server = try await ServerProcess("Kubernetes API server", executable: try IdentityProvider.python(), arguments: arguments,
                                         within: .seconds(30), slow: true)
    }

    /// A server that accepts `provider`'s ID tokens for `audience` and, with `accessTokens`, its
    /// access tokens too.
    convenience init(trusting provider: IdentityProvider, audience: String = IdentityProvider.deviceClientID,
                     accessTokens: Bool = false) async throws {
        try await self.init(issuer: provider.issuer, jwks: provider.jwksURI, audience: audience,
                            userinfo: accessTokens ? provider.userinfoEndpoint : nil)
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: folder)
    }

    func stop() { server.stop() }

    /// What a kubeconfig's cluster names as `server`: `https://127.0.0.1:PORT`.
    var url: String { "https://127.0.0.1:\(port)" }

    /// The CA that signed the server's certificate (for the IP address 127.0.0.1), PEM: a
    /// kubeconfig's `certificate-authority`.
    var caFile: URL { folder.appendingPathComponent("ca.pem") }

    // MARK: What it was asked

    /// What the server counted, control requests aside.
    struct Stats: Decodable, Sendable {
        /// Every API request that got through TLS.
        let requests: Int
        /// Those answered `401`.
        let unauthorized: Int
        /// Those whose token was accepted.
        let accepted: Int
        /// The last 8 characters of each token (`KubeAPIServer.fingerprint(of:)`), in the order first seen.
        let tokens: [String]
        /// How many requests were accepted by each authenticator.
        let kinds: Kinds
        /// How often the provider's JWKS was fetched: at the first ID token and for every unknown `kid`.
        let jwksFetches: Int
        /// Tokens sent to the provider's userinfo endpoint (one per request that got that far).
        let userinfoChecks: Int
        /// TLS handshakes that failed: a client that does not trust `caFile` hangs up in its handshake.
        let handshakeFailures: Int

        struct Kinds: Decodable, Sendable {
            let idToken: Int
            let accessToken: Int
        }
    }

    func stats() async throws -> Stats { try await control.stats(Stats.self) }

    /// Every API request: `method`, `path`, `query`, `status`, `token` (`fingerprint(of:)`),
    /// `kind` (`idToken` or `accessToken` when accepted), `refusal` (why the token was refused:
    /// `expired`, `another issuer`, `another audience`, `bad signature`, `unknown key`, `not a
    /// JWT`, `userinfo 401`, `no token`…, `; `-joined when both authenticators refused), `userAgent`,
    /// `time` (seconds since the epoch, when it arrived).
    func log() async throws -> [[String: Any]] { try await control.log() }

    /// How `stats()` and `log()` show a token: its last 8 characters, since every ID token of one
    /// provider starts with the same header.
    static func fingerprint(of token: String) -> String { String(token.suffix(8)) }

    // The control endpoints are also served over plain HTTP, on the same port: Foundation on Linux
    // cannot be told to trust the server's own CA.
    private var control: ControlEndpoint { ControlEndpoint("the Kubernetes API server", port: port) }
}

/// The real kubectl 1.20 — Debian 12's `kubernetes-client`, unpacked into
/// `.build/kubernetes-client` by `.ci/install-kubernetes-client`, never the machine's
/// `/usr/bin/kubectl` — cut off from the machine's and the user's configuration: its kubeconfig
/// is a file of its own (`KUBECONFIG`), and `HOME` a folder of its own, which holds its discovery
/// cache (`~/.kube/cache`: a second run against the same server asks no discovery for 10 minutes).
struct Kubectl: Sendable {
    /// The kubectl program.
    let path: String
    /// The folder that is `HOME`; plugins written by `writeTokenPlugin` live there too.
    var home: URL { folder.url }
    /// The file that is kubectl's configuration.
    var kubeconfig: URL { home.appendingPathComponent("kubeconfig") }
    /// More environment for every run (an authctl sandbox's bus, say).
    var extraEnvironment: [String: String]
    private let folder: TemporaryFolder

    init(extraEnvironment: [String: String] = [:]) throws {
        path = try Self.program()
        self.extraEnvironment = extraEnvironment
        folder = try TemporaryFolder(prefix: "kubectl-home")
    }

    /// `.build/kubernetes-client/usr/bin/kubectl` in the package; a test fails (it never skips)
    /// when it is missing.
    static func program() throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        let kubectl = root.appendingPathComponent(".build/kubernetes-client/usr/bin/kubectl").path
        guard FileManager.default.isExecutableFile(atPath: kubectl) else {
            Issue.record("kubectl 1.20 is missing: run .ci/install-kubernetes-client")
            throw CocoaError(.fileNoSuchFile)
        }
        return kubectl
    }

    // MARK: The kubeconfig

    /// How kubectl gets the token of the context's user.
    enum Credential: Sendable {
        /// An exec credential plugin (`client.authentication.k8s.io/v1beta1`), started with
        /// `arguments` and `environment` added to kubectl's; with `provideClusterInfo`, its
        /// `KUBERNETES_EXEC_INFO` names the cluster.
        case exec(command: String, arguments: [String] = [], environment: [String: String] = [:], provideClusterInfo: Bool = false)
        /// A fixed token (`user.token`).
        case token(String)
        /// No credentials at all.
        case none
    }

    /// Writes the kubeconfig: one cluster (`server`, trusting `certificateAuthority` when given, else
    /// only the system's CAs), one user with `credential`, and one context of both, current.
    func writeConfig(server: String, certificateAuthority: URL?, credential: Credential, context: String = "test") throws {
        var cluster: [String: Any] = ["server": server]
        if let certificateAuthority { cluster["certificate-authority"] = certificateAuthority.path }
        var user: [String: Any] = [:]
        switch credential {
        case .exec(let command, let arguments, let environment, let provideClusterInfo):
            var exec: [String: Any] = ["apiVersion": "client.authentication.k8s.io/v1beta1", "command": command]
            if !arguments.isEmpty { exec["args"] = arguments }
            if !environment.isEmpty { exec["env"] = environment.sorted { $0.key < $1.key }.map { ["name": $0.key, "value": $0.value] } }
            if provideClusterInfo { exec["provideClusterInfo"] = true }
            user["exec"] = exec
        case .token(let token):
            user["token"] = token
        case .none:
            break
        }
        // JSON is YAML, and kubectl reads it; no quoting rules to get wrong. YAML has no `\/`, which
        // JSONSerialization writes unless told not to.
        let config: [String: Any] = [
            "apiVersion": "v1", "kind": "Config", "preferences": [String: Any](),
            "clusters": [["name": "test-cluster", "cluster": cluster]],
            "users": [["name": "test-user", "user": user]],
            "contexts": [["name": context, "context": ["cluster": "test-cluster", "user": "test-user"]]],
            "current-context": context,
        ]
        try JSONSerialization.data(withJSONObject: config, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]).write(to: kubeconfig, options: .atomic)
    }

    /// `writeConfig` for `server`, trusting its CA unless `trustingCA` is false.
    func writeConfig(for server: KubeAPIServer, credential: Credential, trustingCA: Bool = true) throws {
        try writeConfig(server: server.url, certificateAuthority: trustingCA ? server.caFile : nil, credential: credential)
    }

    /// An exec credential plugin in `home`: a shell script that prints an ExecCredential with the
    /// token last given to `ExecPlugin.give(_:)` and keeps a line per run.
    func writeTokenPlugin(_ token: String, name: String = "token-plugin") throws -> ExecPlugin {
        let plugin = ExecPlugin(folder: home, name: name)
        try plugin.give(token)
        let script = """
            #!/bin/sh
            # kubectl runs this for a token (kubectl 1.20 runs it again after every 401): it says it ran,
            # with what kubectl told it, and prints the ExecCredential the test left beside it.
            printf '%s\\n' "$KUBERNETES_EXEC_INFO" >> \(shellQuoted(plugin.runLog.path))
            exec cat \(shellQuoted(plugin.credentialFile.path))

            """
        guard FileManager.default.createFile(atPath: plugin.command, contents: Data(script.utf8), attributes: [.posixPermissions: 0o755]) else {
            throw CocoaError(.fileWriteUnknown)
        }
        return plugin
    }

    // MARK: Running it

    /// The environment every run gets: PATH and the locale from the test's, the rest kubectl's own.
    var environment: [String: String] {
        let inherited = ProcessInfo.processInfo.environment
        var environment = ["PATH": inherited["PATH"] ?? "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"]
        environment["HOME"] = home.path
        environment["KUBECONFIG"] = kubeconfig.path
        return environment.merging(extraEnvironment) { $1 }
    }

    /// Runs `kubectl ARGUMENTS` without a terminal (so it runs an exec plugin with no stdin), with
    /// `environment` over `self.environment`.
    func run(_ arguments: [String], environment: [String: String] = [:], input: String? = nil, timeout: Double = 60) async throws -> Run {
        try await runProcess(path, arguments, input: input.map { Array($0.utf8) }, environment: self.environment.merging(environment) { $1 },
                             timeout: timeout)
    }

    func run(_ arguments: String..., environment: [String: String] = [:]) async throws -> Run {
        try await run(arguments, environment: environment)
    }
}

/// An exec credential plugin `Kubectl.writeTokenPlugin` wrote.
struct ExecPlugin: Sendable {
    /// What the kubeconfig's `exec.command` names.
    let command: String
    /// One line per run: the `KUBERNETES_EXEC_INFO` kubectl gave it.
    let runLog: URL
    /// The ExecCredential it prints.
    let credentialFile: URL

    fileprivate init(folder: URL, name: String) {
        command = folder.appendingPathComponent(name).path
        runLog = folder.appendingPathComponent("\(name).runs")
        credentialFile = folder.appendingPathComponent("\(name).json")
    }

    /// Makes the plugin print `token` from its next run on.
    func give(_ token: String) throws {
        let credential: [String: Any] = ["apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
                                         "status": ["token": token]]
        try JSONSerialization.data(withJSONObject: credential).write(to: credentialFile, options: .atomic)
    }

    /// `Kubectl.Credential.exec` of this plugin.
    var credential: Kubectl.Credential { .exec(command: command) }

    /// What kubectl gave it as `KUBERNETES_EXEC_INFO`, one entry per run so far.
    func runs() -> [String] {
        ((try? String(contentsOf: runLog, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }
}

/// A folder of its own, removed when the last copy of the value holding it goes.
private final class TemporaryFolder: Sendable {
    let url: URL

    init(prefix: String) throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: url) }
}
