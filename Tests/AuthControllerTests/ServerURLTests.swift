// SPDX-License-Identifier: Apache-2.0
import AuthController
import Testing
import TestSupport

@Suite("Server URLs")
struct ServerURLTests {
    @Test("normalised: scheme and host lower-cased, default port dropped, empty path made /", arguments: [
        ("https://Example.COM:443/token", "https://example.com/token"),
        ("HTTPS://example.com", "https://example.com/"),
        ("https://example.com:8443/realms/x/protocol/openid-connect/token", "https://example.com:8443/realms/x/protocol/openid-connect/token"),
        ("http://LOCALHOST:80/t", "http://localhost/t"),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080/"),
        ("http://127.255.0.9/x", "http://127.255.0.9/x"),
        ("http://[::1]:9000/api/", "http://[::1]:9000/api/"),
        ("https://example.com/token?tenant=a", "https://example.com/token?tenant=a"),
        ("https://xn--9ca.com/", "https://xn--9ca.com/"),
        ("https://example.com/%41", "https://example.com/%41"),
    ])
    func normalised(_ text: String, _ expected: String) throws {
        let url = try ServerURL(validating: text)
        #expect(url.rawValue == expected)
        #expect(ServerURL(rawValue: expected) == url)
    }

    @Test("refused with exit 65, naming the rule", arguments: [
        (Sample(""), "empty"),
        (Sample("https://example.com/" + String(repeating: "a", count: 2048)), "2048"),
        (Sample("https://exa mple.com/"), "space"),
        (Sample("https://example.com/a b"), "space"),
        (Sample("https://example.com/\u{7}"), "control"),
        (Sample("https://exämple.com/"), "non-ASCII"),
        (Sample("example.com/token"), "absolute"),
        (Sample("//example.com/token"), "absolute"),
        (Sample("https:example.com"), "absolute"),
        (Sample("ftp://example.com/"), "scheme"),
        (Sample("https://[.408200:e]/token"), "IPv6"),
        (Sample("https://[v1.x]/"), "IPv6"),
        (Sample("https://a,b.example.com/"), "not a name"),
        (Sample("https://a*.example.com/"), "not a name"),
        (Sample("http://example.com/token"), "loopback"),
        (Sample("http://127.0.0.1.example.com/"), "loopback"),
        (Sample("http://localhost.evil.com/"), "loopback"),
        (Sample("http://127.1/"), "loopback"),
        (Sample("https://user:pw@example.com/"), "user information"),
        (Sample("https://user@example.com/"), "user information"),
        (Sample("https://example.com/token#frag"), "fragment"),
        (Sample("https:///token"), "no host"),
        (Sample("https://%65xample.com/"), "percent-encoded"),
        (Sample("https://example.com:0/"), "port"),
        (Sample("https://example.com:65536/"), "port"),
        (Sample("https://example.com/a%zz"), "percent-encoding"),
        (Sample("https://example.com/" + String(repeating: "a", count: 2020) + "%zz"), "percent-encoding"),
        (Sample("http://127.0.0.09/"), "loopback"),
        (Sample("http://127.000.000.001/"), "loopback"),
    ])
    func refused(_ text: Sample<String>, _ rule: String) {
        #expect {
            try ServerURL(validating: text.value)
        } throws: { error in
            guard let error = error as? AuthError, case .invalidInput(let message) = error else { return false }
            return message.description.contains(rule)
        }
    }

    @Test("endpoints resolve against the URL as a directory")
    func endpoints() throws {
        #expect(try ServerURL(validating: "https://h/api").appending(endpoint: "login") == "https://h/api/login")
        #expect(try ServerURL(validating: "https://h/api/").appending(endpoint: "refresh_tokens") == "https://h/api/refresh_tokens")
        #expect(try ServerURL(validating: "https://h").appending(endpoint: "register") == "https://h/register")
    }

    @Test("client id and scope: 1–255 bytes of printable ASCII, no spaces but single ones inside a scope", arguments: [
        ("cli", "openid profile", true), ("a-b_c.9", "openid", true), ("cli", "openid  profile", false), ("cli", " openid", false),
        ("cli", "openid ", false), ("c i", "openid", false), ("", "openid", false), (String(repeating: "c", count: 256), "openid", false),
        ("cli", "open\u{7}id", false), ("clï", "openid", false),
    ])
    func clientAndScope(_ clientID: String, _ scope: String, _ valid: Bool) {
        let binding = try? ServerBinding(validatingServer: "https://h/token", protocol: nil, clientID: clientID, scope: scope, revokeURL: nil)
        #expect((binding != nil) == valid)
    }

    @Test("the protocol is oauth2 or json; the revoke URL follows the server URL's rules")
    func protocolAndRevokeURL() throws {
        #expect(try ServerBinding(validatingServer: "https://h/", protocol: nil, clientID: nil, scope: nil, revokeURL: nil).tokenProtocol == .oauth2)
        #expect(throws: AuthError.self) { try ServerBinding(validatingServer: "https://h/", protocol: "soap", clientID: nil, scope: nil, revokeURL: nil) }
        #expect {
            try ServerBinding(validatingServer: "https://h/", protocol: "oauth2", clientID: nil, scope: nil, revokeURL: "http://evil.example/revoke")
        } throws: { ($0 as? AuthError)?.message.contains("invalid revoke URL") == true }
    }
}
