// SPDX-License-Identifier: Apache-2.0
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// The git server the credential-helper tests push to (Support/GitServer.swift) serves the real
/// `git` over smart HTTP to an access token the identity provider accepts, and to nothing else.
@Suite("The test git server")
struct GitServerTests {
    /// A provider, a git server that asks it, and an access token of Ada's: the device flow's, refreshed
    /// once (`IdentityProvider.signIn`).
    private struct Setting {
        let provider: IdentityProvider
        let server: GitServer
        let token: String
    }

    private func setting() async throws -> Setting {
        let provider = try await IdentityProvider()
        let server = try await GitServer(userinfo: provider.userinfoEndpoint)
        return Setting(provider: provider, server: server, token: try await provider.signIn().accessToken)
    }

    /// Clones `repo.git` with the token in the URL and commits `file` there; returns the clone.
    private func cloneWithCommit(from setting: Setting, git: IsolatedGit, file: String, contents: Data) async throws -> URL {
        let clone = git.home.appendingPathComponent("clone")
        let url = setting.server.url(for: "repo.git", user: "x-access-token", password: setting.token)
        try #require(try await git.run("clone", url, clone.path).status == 0)
        try contents.write(to: clone.appendingPathComponent(file))
        try #require(try await git.run(["add", file], in: clone).status == 0)
        try #require(try await git.run(["commit", "-q", "-m", "Add \(file)"], in: clone).status == 0)
        return clone
    }

    /// The commit a branch of one of the server's repositories points at.
    private func head(of repository: String, at server: GitServer, git: IsolatedGit) async throws -> String {
        try await git.run(["--git-dir", server.root.appendingPathComponent(repository).path, "rev-parse", "main"]).output
    }

    @Test("git clones with the token in the URL after one 401, sending the token at every later request")
    func cloneWithTokenInURL() async throws {
        let setting = try await setting()
        let git = try IsolatedGit()
        let clone = git.home.appendingPathComponent("clone")
        let run = try await git.run("clone", setting.server.url(for: "repo.git", user: "x-access-token", password: setting.token), clone.path)
        #expect(run.status == 0, "\(run)")
        #expect(FileManager.default.fileExists(atPath: clone.appendingPathComponent("README").path))
        let stats = try await setting.server.stats()
        #expect(stats.unauthorized == 1)
        #expect(stats.forwarded == stats.requests - 1)
        #expect(stats.users == ["x-access-token"])
        #expect(stats.passwords == [GitServer.prefix(of: setting.token)])
    }

    @Test("a push with the token reaches the repository, a small one in one request and one larger than http.postBuffer chunked",
          arguments: [false, true])
    func push(large: Bool) async throws {
        let setting = try await setting()
        let git = try IsolatedGit()
        // Random bytes do not compress, so the pack is larger than the smallest buffer git takes (64 KiB).
        var generator = SystemRandomNumberGenerator()
        let contents = large ? (0..<40_000).map { _ in generator.next() as UInt64 }.withUnsafeBytes { Data($0) } : Data("more\n".utf8)
        let clone = try await cloneWithCommit(from: setting, git: git, file: "more.bin", contents: contents)
        let run = try await git.run((large ? ["-c", "http.postBuffer=65536"] : []) + ["push", "origin", "main"], in: clone)
        #expect(run.status == 0, "\(run)")
        let pushed = try await git.run(["rev-parse", "HEAD"], in: clone).output
        #expect(try await head(of: "repo.git", at: setting.server, git: git) == pushed)
        let chunked = try await setting.server.log().filter { $0["chunked"] as? Bool == true }
        #expect(chunked.count == (large ? 1 : 0))
    }

    @Test("a wrong token is refused: git says Authentication failed and prompts for nothing")
    func wrongToken() async throws {
        let setting = try await setting()
        let git = try IsolatedGit()
        let run = try await git.run("clone", setting.server.url(for: "repo.git", user: "x-access-token", password: "not-a-token"),
                                    git.home.appendingPathComponent("clone").path)
        #expect(run.status == 128)
        #expect(run.stderr.contains("Authentication failed"), "\(run)")
        #expect(!run.stderr.contains("Username for"), "\(run)")
        let stats = try await setting.server.stats()
        #expect(stats.unauthorized == 2)
        #expect(stats.forwarded == 0)
        #expect(stats.userinfoChecks == 1)
    }

    @Test("a token revoked after a clone is refused at the very next request")
    func revokedToken() async throws {
        let setting = try await setting()
        let git = try IsolatedGit()
        let url = setting.server.url(for: "repo.git", user: "x-access-token", password: setting.token)
        #expect(try await git.run("ls-remote", url).status == 0)
        let revocation = try await IdentityProvider.json(setting.provider.revocationEndpoint, form: ["token": setting.token, "client_id": IdentityProvider.deviceClientID])
        #expect(revocation.status == 200)
        let run = try await git.run("ls-remote", url)
        #expect(run.status == 128)
        #expect(run.stderr.contains("Authentication failed"), "\(run)")
    }

    @Test("without credentials in the URL, git takes the token from a credential helper in its global configuration")
    func credentialHelper() async throws {
        let setting = try await setting()
        let git = try IsolatedGit()
        let helper = "!f() { echo username=u; echo password=\(setting.token); }; f"
        #expect(try await git.run("config", "--global", "credential.helper", helper).status == 0)
        let clone = git.home.appendingPathComponent("clone")
        let run = try await git.run("clone", setting.server.url(for: "repo.git"), clone.path)
        #expect(run.status == 0, "\(run)")
        #expect(FileManager.default.fileExists(atPath: clone.appendingPathComponent("README").path))
        #expect(try await setting.server.stats().users == ["u"])
    }

    @Test("without credentials and without a helper, git fails at once instead of prompting")
    func noCredentials() async throws {
        let setting = try await setting()
        let git = try IsolatedGit()
        let run = try await git.run("clone", setting.server.url(for: "repo.git"), git.home.appendingPathComponent("clone").path)
        #expect(run.status == 128)
        #expect(run.stderr.contains("terminal prompts disabled"), "\(run)")
        #expect(try await setting.server.stats().userinfoChecks == 0)
    }
}
