// SPDX-License-Identifier: Apache-2.0
import AuthControllerCore
@testable import authctl
import Testing

/// git's credential-helper protocol as `git-credential` reads it, and the hosts it is set up for.
@Suite("git-credential: requests and hosts")
struct GitCredentialTests {
    private func request(_ text: String) throws(AuthError) -> GitCredentialRequest {
        try GitCredentialRequest(parsing: Array(text.utf8))
    }

    @Test("key=value lines up to a blank line; unknown keys ignored; the last of a repeated key")
    func parsing() throws {
        let parsed = try request("protocol=https\nhost=git.example.org:8443\ncapability[]=authtype\nusername=a=b\nhost=other\n\npassword=after-the-end\n")
        #expect(parsed.host == "other")
        #expect(parsed.username == "a=b")
        #expect(parsed.password == nil)
        #expect(parsed.isSafeTransport)
    }

    @Test("a line without '=' or a value with NUL is refused (65)")
    func malformed() {
        #expect(throws: AuthError.self) { try request("protocol=https\nnonsense\n") }
        #expect((try? request("protocol=https\nhost=a\u{0}b\n")) == nil)
    }

    @Test("https anywhere, http only to a loopback host, nothing else", arguments: [
        ("https", "git.example.org", true), ("http", "127.0.0.1:8080", true), ("http", "localhost", true),
        ("http", "git.example.org", false), ("ssh", "git.example.org", false), ("http", "127.0.0.1.evil.org", false),
    ])
    func transport(_ scheme: String, _ host: String, _ safe: Bool) throws {
        #expect(try request("protocol=\(scheme)\nhost=\(host)\n").isSafeTransport == safe)
    }

    @Test("setup takes https://HOST[:PORT] (or loopback http) without a path; the host is as git sends it")
    func setupURL() throws {
        #expect(try GitHost.parse(setupURL: "https://Git.Example.org").host == "git.example.org")
        #expect(try GitHost.parse(setupURL: "https://git.example.org:8443/").host == "git.example.org:8443")
        #expect(try GitHost.parse(setupURL: "https://git.example.org:443").host == "git.example.org")
        #expect(try GitHost.parse(setupURL: "http://127.0.0.1:9418").host == "127.0.0.1:9418")
        for refused in ["https://git.example.org/group", "https://git.example.org/?q", "http://git.example.org", "ssh://git.example.org",
                        "https://user@git.example.org", "git.example.org"] {
            #expect(throws: AuthError.self, "\(refused)") { try GitHost.parse(setupURL: refused) }
        }
    }

    @Test("the helper's path is quoted for the shell git runs it with")
    func shellQuoting() {
        #expect(GitCredential.shellQuoted("/usr/bin/authctl") == "'/usr/bin/authctl'")
        #expect(GitCredential.shellQuoted("/opt/it's/authctl") == "'/opt/it'\\''s/authctl'")
    }
}
