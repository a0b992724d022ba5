// SPDX-License-Identifier: Apache-2.0
import DesktopSandbox
import Foundation
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Requests through the proxy the environment names, as curl reads it: Debian's tinyproxy and
/// squid (with Basic authentication) in front of the real identity provider, which serves HTTPS
/// as `idp.authctl.test` — a name only the proxies resolve (each has its own `/etc/hosts`), with a
/// certificate of a test authority that authctl trusts through a CA bundle bind-mounted over the
/// system's, in a mount namespace of its own. So a sign-in that succeeds went through the proxy,
/// with TLS verified end to end against the provider's own name.
@Suite("Proxies")
struct ProxyTests {
    static let providerName = "idp.authctl.test"

    /// The identity provider serving HTTPS as ``providerName`` with a certificate of a test
    /// authority of its own, and its HTTPS issuer.
    private func providerOverHTTPS() async throws -> (TestCertificates, IdentityProvider, issuer: String) {
        let certificates = try await TestCertificates(hostName: Self.providerName)
        let provider = try await IdentityProvider(completeDiscovery: true, tls: certificates)
        return (certificates, provider, try await provider.httpsIssuer())
    }

    /// A scenario whose authctl trusts `certificates`' authority (and, with `resolving`, resolves
    /// the provider's name itself, so that a direct connection would work), with `variables` set.
    private func scenario(_ certificates: TestCertificates, resolving: Bool = false,
                          _ variables: [String: String]) async throws -> Scenario {
        var scenario = try await Scenario()
        var files = [(certificates.authority, "/etc/ssl/certs/ca-certificates.crt")]
        if resolving { files.append((try certificates.hostsFile(), "/etc/hosts")) }
        scenario.launcher = try mountNamespaceLauncher(binding: files)
        // Neither a proxy from the machine's own environment nor a desktop of its own.
        for name in ["https_proxy", "HTTPS_PROXY", "http_proxy", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY", "XDG_CURRENT_DESKTOP"] {
            scenario.extraEnvironment[name] = ""
        }
        scenario.extraEnvironment["GSETTINGS_BACKEND"] = "memory"
        scenario.extraEnvironment.merge(variables) { $1 }
        return scenario
    }

    @Test("a sign-in in the browser, a refresh and a sign-out through tinyproxy and squid (with its user and password), under GNOME's proxy resolver and without: every request of authctl's went through the proxy, TLS verified end to end; server show names the proxy")
    func throughProxies() async throws {
        let (certificates, provider, issuer) = try await providerOverHTTPS()
        let hosts = try certificates.hostsFile()
        let tinyproxy = try await ForwardProxy(.tinyproxy, hosts: hosts)
        let squid = try await ForwardProxy(.squid, hosts: hosts, users: [("proxyuser7", "p@ss:w/rd")])
        let tunnelTo = String(issuer.dropFirst("https://".count).prefix { $0 != "/" })

        // Without a scheme, http:// is meant; the user and password are percent-encoded in the URL.
        let variants: [(proxy: ForwardProxy, value: String, desktop: String)] = [
            (tinyproxy, "127.0.0.1:\(tinyproxy.port)", ""),
            (tinyproxy, tinyproxy.url(), "GNOME"),
            (squid, squid.url(user: "proxyuser7", password: "p%40ss%3Aw%2Frd"), ""),
            (squid, squid.url(user: "proxyuser7", password: "p%40ss%3Aw%2Frd"), "GNOME"),
        ]
        for (proxy, value, desktop) in variants {
            let before = (tunnels: proxy.tunnels().count, log: try await provider.log().count)
            let result = URL(fileURLWithPath: FileManager.default.temporaryDirectory.path + "/stand-in-\(UUID().uuidString).json")
            var scenario = try await scenario(certificates, ["https_proxy": value, "XDG_CURRENT_DESKTOP": desktop])
            scenario.extraEnvironment.merge(try IdentityProvider.browserEnvironment(result: result)) { $1 }
            let context = "\(proxy.kind) \(desktop.isEmpty ? "without a desktop" : "under \(desktop)")"

            let bind = try await scenario.authctl("server", "set", issuer, "--protocol", "oidc", "--client-id", IdentityProvider.browserClientID)
            try #require(bind.status == 0, "\(context): \(bind)")
            let show = try await scenario.authctl("server", "show")
            #expect(show.stdout.split(separator: "\n").last == "proxy: 127.0.0.1:\(proxy.port)", "\(context): \(show)")
            let json = try await scenario.authctl("server", "show", "--json")
            let document = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
            #expect(document?["proxy"] as? String == "127.0.0.1:\(proxy.port)", "\(context): \(json)")
            #expect(!show.stdout.contains("proxyuser7") && !json.stdout.contains("proxyuser7") && !json.stdout.contains("p%40ss"), "\(context): the proxy's user shown")

            let signIn = try await scenario.authctl("sign-in", "--flow", "browser", "--timeout", "60")
            try #require(signIn.status == 0, "\(context): \(signIn)\n\(IdentityProvider.standInOutcome(at: result) ?? [:])\n\(proxy.log())")
            let refresh = try await scenario.authctl("token", "--refresh")
            #expect(refresh.status == 0, "\(context): \(refresh)")
            let signOut = try await scenario.authctl("sign-out")
            #expect(signOut.status == 0 && signOut.stderr.isEmpty, "\(context): \(signOut)")

            // authctl's requests (the stand-in's have a user agent of their own), all over TLS.
            let requests = Array(try await provider.log().dropFirst(before.log))
            let authctls = requests.filter { ($0["userAgent"] as? String ?? "").hasPrefix("authctl") }
            #expect(authctls.allSatisfy { $0["tls"] as? Bool == true && $0["host"] as? String == tunnelTo }, "\(context): \(authctls)")
            let endpoints = Set(authctls.compactMap { $0["endpoint"] as? String })
            for endpoint in ["discovery", "jwks", "authorization_code", "refresh", "revoke"] {
                #expect(endpoints.contains(endpoint), "\(context): no \(endpoint) request through the proxy: \(endpoints.sorted())")
            }
            // Every request to the provider, authctl's and the browser's, came through a tunnel of
            // this proxy to the provider's name; the loopback callback did not.
            let tlsRequests = requests.filter { $0["tls"] as? Bool == true }.count
            let tunnelled = await eventually(within: .seconds(30)) { proxy.tunnels().count - before.tunnels >= tlsRequests }
            let tunnels = Array(proxy.tunnels().dropFirst(before.tunnels))
            #expect(tunnelled && tunnels.allSatisfy { $0 == tunnelTo }, "\(context): \(tunnels) for \(tlsRequests) requests\n\(proxy.log())")
            #expect(!proxy.log().contains("127.0.0.1:") || !proxy.log().contains("/callback"), "\(context): the loopback callback went through the proxy")
        }
    }

    @Test("under GNOME its own proxy setting (GIO's GNOME resolver) applies only when no proxy variable is set; a variable wins over it")
    func gnomeSetting() async throws {
        let (certificates, provider, issuer) = try await providerOverHTTPS()
        let hosts = try certificates.hostsFile()
        let desktops = try await ForwardProxy(.tinyproxy, hosts: hosts)
        let variables = try await ForwardProxy(.tinyproxy, hosts: hosts)
        var scenario = try await scenario(certificates, ["XDG_CURRENT_DESKTOP": "GNOME", "GSETTINGS_BACKEND": "keyfile"])
        // GSettings' keyfile backend: GNOME's proxy settings as Settings would write them.
        let keyfile = scenario.configHome + "/glib-2.0/settings/keyfile"
        try FileManager.default.createDirectory(atPath: scenario.configHome + "/glib-2.0/settings", withIntermediateDirectories: true)
        try "[system/proxy]\nmode='manual'\n\n[system/proxy/https]\nhost='127.0.0.1'\nport=\(desktops.port)\n"
            .write(toFile: keyfile, atomically: true, encoding: .utf8)

        let bind = try await scenario.authctl("server", "set", issuer, "--protocol", "oidc", "--client-id", IdentityProvider.deviceClientID)
        try #require(bind.status == 0, "\(bind)\n\(desktops.log())")
        #expect(try await scenario.authctl("server", "show").stdout.hasSuffix("proxy: 127.0.0.1:\(desktops.port)\n"))
        let throughDesktops = desktops.tunnels().count
        #expect(throughDesktops >= 1, "discovery did not go through GNOME's proxy: \(desktops.log())")

        scenario.extraEnvironment["https_proxy"] = variables.url()
        #expect(try await scenario.authctl("server", "show").stdout.hasSuffix("proxy: 127.0.0.1:\(variables.port)\n"))
        let again = try await scenario.authctl("server", "set", issuer, "--protocol", "oidc", "--client-id", IdentityProvider.deviceClientID)
        #expect(again.status == 0, "\(again)")
        #expect(variables.tunnels().count >= 1 && desktops.tunnels().count == throughDesktops, "\(variables.log())\n\(desktops.log())")
        withExtendedLifetime(provider) {}
    }

    @Test("a proxy that cannot be reached, that asks for a user and password (407), or refuses them: 69 naming HOST:PORT and the variable, never the password, and nothing goes direct although the provider could be reached directly")
    func proxyFailures() async throws {
        let (certificates, provider, issuer) = try await providerOverHTTPS()
        let squid = try await ForwardProxy(.squid, hosts: try certificates.hostsFile(), users: [("dev", "right")])
        let closed = try ForwardProxy.unusedPort()

        // authctl resolves the provider's name itself here: directly, it would get there.
        var scenario = try await scenario(certificates, resolving: true, [:])
        let bind = try await scenario.authctl("server", "set", issuer, "--protocol", "oidc", "--client-id", IdentityProvider.deviceClientID)
        try #require(bind.status == 0, "\(bind)")
        #expect(try await scenario.authctl("server", "show").stdout.contains("proxy: direct"))
        let direct = try await provider.log().count
        #expect(direct > 0, "the provider was not reached directly: the test proves nothing")

        let cases: [(variables: [String: String], message: String)] = [
            (["https_proxy": "http://127.0.0.1:\(closed)"], "cannot reach the proxy 127.0.0.1:\(closed) named by https_proxy"),
            (["HTTPS_PROXY": "http://127.0.0.1:\(closed)"], "cannot reach the proxy 127.0.0.1:\(closed) named by https_proxy"),
            (["all_proxy": squid.url()],
             "the proxy 127.0.0.1:\(squid.port) asks for a user and password: put them in all_proxy (http://USER:PASSWORD@127.0.0.1:\(squid.port))"),
            (["https_proxy": squid.url(user: "dev", password: "wrong-secret")],
             "the proxy 127.0.0.1:\(squid.port) refused the user and password in https_proxy"),
            (["ALL_PROXY": squid.url(user: "intruder", password: "wrong-secret")],
             "the proxy 127.0.0.1:\(squid.port) refused the user and password in all_proxy"),
        ]
        for (variables, message) in cases {
            scenario.extraEnvironment.merge(["https_proxy": "", "HTTPS_PROXY": "", "all_proxy": "", "ALL_PROXY": ""]) { $1 }
            scenario.extraEnvironment.merge(variables) { $1 }
            let run = try await scenario.authctl(["sign-in", "--flow", "device", "--timeout", "30"])
            #expect(run.status == 69 && run.stderr.contains(message), "\(variables): \(run)")
            #expect(run.stderr.split(separator: "\n").count == 1, "\(variables): \(run)")
            #expect(!run.stderr.contains("wrong-secret") && !run.stderr.contains("intruder"), "\(variables): \(run)")
        }
        #expect(try await provider.log().count == direct, "a request went direct when its proxy failed")
        #expect(try await scenario.authctl("status").status == 1)
    }

    @Test("proxy variables authctl cannot use: 64 naming the variable, without its value; a loopback server never goes through the proxy; no_proxy as curl matches it")
    func variables() async throws {
        let server = try await TokenServer()
        let tinyproxy = try await ForwardProxy(.tinyproxy, hosts: "/etc/hosts")
        for (value, words) in [
            ("socks5://127.0.0.1:1080", "its scheme is socks5, and authctl reaches proxies over http:// only"),
            ("https://127.0.0.1:3128", "its scheme is https"),
            ("http://:8080", "it has no host"),
            ("http://127.0.0.1:70000", "its port must be a number from 1 to 65535"),
            ("http://127.0.0.1:http", "its port must be a number from 1 to 65535"),
            ("http://proxy .example:80", "a space"),
            ("http://user:s3cr%t@127.0.0.1:3128", "percent-encoding"),
        ] {
            var scenario = try await Scenario()
            scenario.extraEnvironment = ["https_proxy": value, "no_proxy": ""]
            let run = try await scenario.authctl(["sign-in", "ada", "--server", "https://token.authctl.test/oauth/token", "--password-stdin"],
                                                 input: Array("pw".utf8))
            #expect(run.status == 64 && run.stderr.contains("https_proxy is not a proxy authctl can use") && run.stderr.contains(words),
                    "\(value): \(run)")
            #expect(!run.stderr.contains("s3cr"), "\(value): \(run)")
            // Nothing was bound: the sign-in is one command.
            #expect(try await scenario.authctl("server", "show").status == 1)
        }

        // A loopback server with every proxy variable set: direct, and the proxy sees nothing.
        var scenario = try await Scenario()
        scenario.extraEnvironment = ["https_proxy": tinyproxy.url(), "http_proxy": tinyproxy.url(), "all_proxy": tinyproxy.url(), "no_proxy": ""]
        try server.configure(["accounts": ["ada": "pw"]])
        let signIn = try await scenario.authctl(["sign-in", "ada", "--server", server.oauth2, "--password-stdin"], input: Array("pw".utf8))
        #expect(signIn.status == 0, "\(signIn)")
        #expect(try await scenario.authctl("server", "show").stdout.contains("proxy: direct"))
        #expect(tinyproxy.log().split(separator: "\n").filter { $0.contains("Request (file descriptor") }.isEmpty, "\(tinyproxy.log())")

        // no_proxy: the host itself, a subdomain, any case, spaces, and * for all.
        for (noProxy, direct) in [("authctl.test", true), (" .Authctl.TEST ,other", true), ("*", true), ("idp.authctl.test.example", false),
                                  ("ctl.test", false), ("", false)] {
            var bound = try await Scenario()
            bound.extraEnvironment = ["https_proxy": "http://127.0.0.1:3128", "no_proxy": noProxy]
            let set = try await bound.authctl("server", "set", "https://idp.authctl.test/oauth/token")
            #expect(set.status == 0, "\(set)")
            let show = try await bound.authctl("server", "show")
            #expect(show.stdout.contains(direct ? "proxy: direct" : "proxy: 127.0.0.1:3128"), "no_proxy=\(noProxy): \(show)")
        }
    }

    @Test("a proxy that misbehaves: a refused tunnel (502) is 69 naming the proxy and its status, not the server's answer; garbage and a CONNECT answer with a body are clear errors; a proxy that holds the connection is 75 at the deadline")
    func misbehavingProxies() async throws {
        for (mode, status, words) in [
            ("refuse-502", 69, "the proxy 127.0.0.1:PORT refused the tunnel to https://token.authctl.test/oauth/token (HTTP 502)"),
            ("garbage", 69, "127.0.0.1:PORT"),
            ("connect-body", 69, "through the proxy 127.0.0.1:PORT"),
            ("close", 69, "127.0.0.1:PORT"),
            ("hold", 75, "the proxy 127.0.0.1:PORT did not open the way to https://token.authctl.test/oauth/token within 2 s"),
        ] as [(String, Int32, String)] {
            let proxy = try await ServerProcess("misbehaving proxy", executable: try IdentityProvider.python(),
                                                arguments: [IdentityProvider.directory.deletingLastPathComponent().appendingPathComponent("bad_proxy.py").path, mode],
                                                within: .seconds(30))
            var scenario = try await Scenario()
            scenario.extraEnvironment = ["https_proxy": "http://127.0.0.1:\(proxy.port)", "no_proxy": ""]
            let run = try await scenario.authctl(["--server-timeout", "2", "sign-in", "ada", "--server", "https://token.authctl.test/oauth/token",
                                                  "--password-stdin"], input: Array("pw".utf8))
            let expected = words.replacingOccurrences(of: "PORT", with: "\(proxy.port)")
            #expect(run.status == status && run.stderr.contains(expected) && run.stderr.split(separator: "\n").count == 1, "\(mode): \(run)")
            #expect(run.seconds < 10, "\(mode): \(run.seconds) s")
            proxy.stop()
        }
    }
}
