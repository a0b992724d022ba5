// SPDX-License-Identifier: Apache-2.0
import Foundation
import Testing

/// The Kubernetes API server the kubectl tests run against (Support/KubeAPIServer.swift) serves the
/// real kubectl 1.20 over HTTPS to a token of the real identity provider, as kube-apiserver's OIDC
/// and token authenticators would, and to nothing else. No authctl here: the provider's tokens
/// come from its device flow, and kubectl gets them from a shell-script exec plugin.
@Suite("The test Kubernetes API server")
struct KubeAPIServerTests {
    /// What kubectl 1.20 prints when the server answers 401.
    private static let unauthorized = "error: You must be logged in to the server (Unauthorized)"

    @Test("an ID token from an exec plugin lists the namespaces; every kubectl process runs the plugin once, and the second asks no discovery")
    func idTokenThroughExecPlugin() async throws {
        let provider = try await IdentityProvider()
        let server = try await KubeAPIServer(trusting: provider)
        let tokens = try await provider.signIn()
        let kubectl = try Kubectl()
        let plugin = try kubectl.writeTokenPlugin(tokens.idToken)
        try kubectl.writeConfig(for: server, credential: plugin.credential)

        let table = try await kubectl.run("get", "namespaces")
        #expect(table.status == 0, "\(table)")
        let rows = table.output.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true).prefix(2).joined(separator: " ") }
        #expect(rows == ["NAME STATUS", "default Active", "kube-system Active"], "\(table)")
        let names = try await kubectl.run("get", "namespaces", "-o", "name")
        #expect(names.status == 0, "\(names)")
        #expect(names.output == "namespace/default\nnamespace/kube-system")

        #expect(plugin.runs() == Array(repeating: #"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1beta1","spec":{}}"#, count: 2))
        let stats = try await server.stats()
        #expect(stats.unauthorized == 0)
        #expect(stats.kinds.idToken == stats.requests)
        #expect(stats.tokens == [KubeAPIServer.fingerprint(of: tokens.idToken)])
        #expect(stats.jwksFetches == 1)
        #expect(stats.userinfoChecks == 0)
        let paths = try await server.log().map { $0["path"] as? String ?? "" }
        #expect(paths == ["/api", "/apis", "/api/v1", "/api/v1/namespaces", "/api/v1/namespaces"])
    }

    @Test("an access token is accepted by a server that asks the provider's userinfo, and only by one")
    func accessToken() async throws {
        let provider = try await IdentityProvider()
        let tokens = try await provider.signIn()
        let idTokensOnly = try await KubeAPIServer(trusting: provider)
        let withUserinfo = try await KubeAPIServer(trusting: provider, accessTokens: true)

        let refused = try Kubectl()
        try refused.writeConfig(for: idTokensOnly, credential: try refused.writeTokenPlugin(tokens.accessToken).credential)
        let refusal = try await refused.run("get", "namespaces", "-o", "name")
        #expect(refusal.status == 1)
        #expect(refusal.stderr.contains(Self.unauthorized), "\(refusal)")
        #expect(try await idTokensOnly.log().allSatisfy { $0["refusal"] as? String == "not a JWT" })

        let accepted = try Kubectl()
        try accepted.writeConfig(for: withUserinfo, credential: try accepted.writeTokenPlugin(tokens.accessToken).credential)
        let listed = try await accepted.run("get", "namespaces", "-o", "name")
        #expect(listed.status == 0, "\(listed)")
        #expect(listed.output == "namespace/default\nnamespace/kube-system")
        let stats = try await withUserinfo.stats()
        #expect(stats.kinds.accessToken == stats.requests)
        #expect(stats.kinds.idToken == 0)
        // Asked at every request, as the git server asks: a revoked token fails at once.
        #expect(stats.userinfoChecks == stats.requests)
        #expect(stats.jwksFetches == 0)
    }

    /// Tokens the server must refuse, and why.
    enum Refused: String, CaseIterable, Sendable {
        case notAToken = "not a JWT"
        case tamperedSignature = "bad signature"
        case expired = "expired"
        case anotherIssuer = "another issuer"
        case anotherAudience = "another audience"
    }

    @Test("a token that is no ID token for this server is refused, and kubectl says Unauthorized, running the plugin again after every 401",
          arguments: Refused.allCases)
    func refused(_ token: Refused) async throws {
        let provider = try await IdentityProvider()
        let server = try await KubeAPIServer(trusting: provider, audience: token == .anotherAudience ? "someone-else" : IdentityProvider.deviceClientID)
        let sent: String
        switch token {
        case .notAToken:
            sent = "not-a-token"
        case .tamperedSignature:
            var parts = try await provider.signIn().idToken.split(separator: ".").map(String.init)
            // A character in the middle: the last one may differ in padding bits only.
            let middle = parts[2].index(parts[2].startIndex, offsetBy: parts[2].count / 2)
            parts[2].replaceSubrange(middle...middle, with: parts[2][middle] == "A" ? "B" : "A")
            sent = parts.joined(separator: ".")
        case .expired:
            // Issued already a minute past its expiry: no waiting for the clock.
            try await provider.configure(["ID_TOKEN_EXPIRE_SECONDS": -60])
            sent = try await provider.signIn().idToken
        case .anotherIssuer:
            sent = try await IdentityProvider().signIn().idToken
        case .anotherAudience:
            sent = try await provider.signIn().idToken
        }
        let kubectl = try Kubectl()
        let plugin = try kubectl.writeTokenPlugin(sent)
        try kubectl.writeConfig(for: server, credential: plugin.credential)

        let run = try await kubectl.run("get", "namespaces")
        #expect(run.status == 1)
        #expect(run.stderr.contains(Self.unauthorized), "\(run)")
        #expect(run.stdout.isEmpty)
        let stats = try await server.stats()
        #expect(stats.accepted == 0)
        #expect(stats.unauthorized == stats.requests)
        #expect(stats.unauthorized > 0)
        #expect(try await server.log().map { $0["refusal"] as? String } == Array(repeating: token.rawValue, count: stats.requests))
        // kubectl 1.20 throws away a credential the server refused and runs the plugin again, though
        // it never retries the request with the new one.
        #expect(plugin.runs().count == stats.unauthorized + 1)
        // The issuer is checked before the signature, so a foreign token costs no JWKS fetch.
        #expect(stats.jwksFetches == ([.notAToken, .anotherIssuer].contains(token) ? 0 : 1))
    }

    @Test("kubectl trusts the server's certificate through the kubeconfig's CA, and without it hangs up in the TLS handshake")
    func certificateAuthority() async throws {
        let provider = try await IdentityProvider()
        let server = try await KubeAPIServer(trusting: provider)
        let tokens = try await provider.signIn()
        let kubectl = try Kubectl()
        let plugin = try kubectl.writeTokenPlugin(tokens.idToken)

        try kubectl.writeConfig(for: server, credential: plugin.credential, trustingCA: false)
        let untrusted = try await kubectl.run("get", "namespaces", "-o", "name")
        #expect(untrusted.status == 1)
        #expect(untrusted.stderr.contains("x509: certificate signed by unknown authority"), "\(untrusted)")
        let refusedStats = try await server.stats()
        #expect(refusedStats.requests == 0)
        #expect(refusedStats.handshakeFailures > 0)

        try kubectl.writeConfig(for: server, credential: plugin.credential)
        let trusted = try await kubectl.run("get", "namespaces", "-o", "name")
        #expect(trusted.status == 0, "\(trusted)")
        #expect(trusted.output == "namespace/default\nnamespace/kube-system")
        #expect(try await server.stats().accepted > 0)
    }

    @Test("a plugin that fails stops kubectl before any request: its exit status in kubectl's error, its stderr passed through")
    func failingPlugin() async throws {
        let provider = try await IdentityProvider()
        let server = try await KubeAPIServer(trusting: provider)
        let kubectl = try Kubectl()
        let plugin = kubectl.home.appendingPathComponent("failing-plugin")
        let script = "#!/bin/sh\necho 'the plugin says no' >&2\nexit 3\n"
        #expect(FileManager.default.createFile(atPath: plugin.path, contents: Data(script.utf8), attributes: [.posixPermissions: 0o755]))
        try kubectl.writeConfig(for: server, credential: .exec(command: plugin.path))

        let run = try await kubectl.run("get", "namespaces")
        #expect(run.status == 1)
        #expect(run.stderr.contains("Unable to connect to the server: getting credentials: exec: executable \(plugin.path) failed with exit code 3"),
                "\(run)")
        #expect(run.stderr.contains("the plugin says no"), "\(run)")
        #expect(try await server.stats().requests == 0)
    }
}
