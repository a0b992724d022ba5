// SPDX-License-Identifier: Apache-2.0
@testable import AuthControllerCore
import FoundationEssentials
import Testing

/// Which proxy a request takes, as curl reads the variables, and how a proxy variable is read.
@Suite("Proxy variables and routes")
struct ProxyRouteTests {
    private func route(_ url: String, _ variables: ProxyVariables) throws -> String {
        switch try ProxyRoute.of(url, under: variables) {
        case .direct: "direct"
        case .desktop: "desktop"
        case .proxy(let proxy): "\(proxy.variable) \(proxy.name)"
        }
    }

    @Test("https_proxy for https, http_proxy for http, all_proxy for either when its own is unset; none set, the desktop's; loopback always direct")
    func choice() throws {
        let https = "https://idp.example.com/o"
        #expect(try route(https, ProxyVariables()) == "desktop")
        #expect(try route(https, ProxyVariables(https: "proxy:3128")) == "https_proxy proxy:3128")
        #expect(try route(https, ProxyVariables(http: "plain:80")) == "direct")
        #expect(try route(https, ProxyVariables(all: "all:1")) == "all_proxy all:1")
        #expect(try route(https, ProxyVariables(https: "own:2", all: "all:1")) == "https_proxy own:2")
        #expect(try route("http://idp.example.com/", ProxyVariables(https: "own:2", http: "plain:80")) == "http_proxy plain:80")
        #expect(try route("http://idp.example.com/", ProxyVariables(https: "own:2", all: "all:1")) == "all_proxy all:1")
        // An empty value is unset; no_proxy alone means every variable is considered: direct.
        #expect(try route(https, ProxyVariables(https: "", all: "")) == "desktop")
        #expect(try route(https, ProxyVariables(noProxy: "other.example")) == "direct")
        for loopback in ["https://localhost/t", "https://127.0.0.1:8443/t", "https://127.5.6.7/t", "https://[::1]:8443/t", "http://127.0.0.1/t"] {
            #expect(try route(loopback, ProxyVariables(https: "p:1", http: "p:1", all: "p:1")) == "direct", "\(loopback)")
            #expect(try route(loopback, ProxyVariables()) == "direct", "\(loopback)")
        }
        // Not loopback: a name that only starts like one.
        #expect(try route("https://127.0.0.1.nip.io/t", ProxyVariables(https: "p:1")) == "https_proxy p:1")
    }

    @Test("no_proxy as curl matches it", arguments: [
        ("example.com", "idp.example.com", true), (".example.com", "idp.example.com", true), ("example.com", "example.com", true),
        ("*.example.com", "idp.example.com", true), (" EXAMPLE.com , other", "IDP.Example.com", true), ("*", "anything.at.all", true),
        ("example.com", "badexample.com", false), ("ample.com", "idp.example.com", false), ("example.com.evil", "example.com", false),
        ("", "idp.example.com", false), ("192.0.2.7", "192.0.2.7", true), ("192.0.2.7", "192.0.2.70", false),
        ("::1", "[::1]", true), ("[2001:db8::1]", "[2001:db8::1]", true), ("example.com.", "idp.example.com", true),
        ("*,example.com", "idp.other", false), (",,", "x.example", false),
        // An address is matched as curl matches it: itself or a block, never a suffix.
        ("0.0.1", "10.0.0.1", false), ("10.", "192.168.1.10", false), ("1", "10.0.0.1", false),
        ("10.0.0.0/8", "10.1.2.3", true), ("10.0.0.0/8", "11.0.0.1", false), (" 192.168.0.0/16 ", "192.168.7.9", true),
        ("0.0.0.0/0", "203.0.113.9", true), ("192.0.2.7/33", "192.0.2.7", false), ("192.0.2.7/", "192.0.2.7", false),
    ] as [(String, String, Bool)])
    func noProxy(list: String, host: String, matches: Bool) {
        #expect(ProxyRoute.noProxy(list, matches: host.lowercased()) == matches)
    }

    @Test("a proxy variable: scheme optional, port 1080 by default, user and password percent-decoded and never in its name")
    func parsing() throws {
        let plain = try HTTPProxy(parsing: "proxy.corp:3128", from: "https_proxy")
        #expect(plain.name == "proxy.corp:3128" && plain.user == nil && plain.uri == "http://proxy.corp:3128")
        let defaulted = try HTTPProxy(parsing: "HTTP://Proxy.Corp/", from: "all_proxy")
        #expect(defaulted.name == "proxy.corp:1080")
        let credentials = try HTTPProxy(parsing: "http://dev%40corp:p%3Ass%2Fw@10.0.0.1:8080", from: "https_proxy")
        #expect(credentials.user == "dev@corp" && credentials.password == "p:ss/w")
        #expect(credentials.name == "10.0.0.1:8080" && "\(credentials)" == "10.0.0.1:8080")
        // The user and password go only in authctl's own Proxy-Authorization, never to GIO and
        // libsoup (which would re-send them twenty times after a 407).
        #expect(credentials.uri == "http://10.0.0.1:8080")
        #expect(credentials.basicAuthorization == "Basic " + Data("dev@corp:p:ss/w".utf8).base64EncodedString())
        let userOnly = try HTTPProxy(parsing: "http://dev@h:1", from: "https_proxy")
        #expect(userOnly.user == "dev" && userOnly.password == nil)
        let v6 = try HTTPProxy(parsing: "http://[2001:db8::1]:3128", from: "https_proxy")
        #expect(v6.name == "[2001:db8::1]:3128")
        let zoned = try HTTPProxy(parsing: "http://[fe80::1%25eth0]:3128", from: "https_proxy")
        #expect(zoned.uri == "http://[fe80::1%25eth0]:3128")
    }

    @Test("what is not an HTTP proxy is 64, naming the variable and never the value", arguments: [
        "socks5://h:1080", "socks5h://h:1", "https://h:3128", "://h:1", "http://", "http://:3128", "http://h:0", "http://h:65536",
        "http://h:99999999999999999999", "http://h:-1", "http://h:", "http://h:3x", "http://[::1", "http://[::1]x", "http://h h:1",
        "http://h\u{7}:1", "http://ünï:1", "http://:secret@h:1", "http://u:sec%zzret@h:1", "http://u%00:secret@h:1",
        "http://h_@!:1", String(repeating: "a", count: 3000),
        // Not an IPv6 address in [...]: GIO would take no proxy at all, and authctl go direct.
        "http://u:secret@[zzz]:3128", "http://[1.2.3.4]:3128", "http://[fe80::1%eth0]:3128", "http://[::1%25]:1", "http://[]:1",
        // A password's '/', '?' or '#' not percent-encoded: "u:4711" would be the host and port.
        "http://u:4711/secret@proxy:3128", "http://u:99?secret@proxy:3128", "http://u:12#secret@proxy:3128",
        // No scheme, and a password with "://": what precedes it is not a scheme to name.
        "u:secret://x@proxy:3128",
    ])
    func refused(_ value: String) {
        #expect {
            try HTTPProxy(parsing: value, from: "https_proxy")
        } throws: { error in
            guard let error = error as? AuthError, case .usage = error else { return false }
            return error.exitCode == 64 && error.message.hasPrefix("https_proxy is not a proxy authctl can use: ")
                && !error.message.contains("secret") && !error.message.contains("\u{7}") && !error.message.contains("4711")
        }
    }
}
