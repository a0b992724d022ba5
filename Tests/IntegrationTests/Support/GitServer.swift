// SPDX-License-Identifier: Apache-2.0
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// A git smart-HTTP server on 127.0.0.1 (`git_server.py` beside this file), started by the test
/// that needs it and stopped with it: `git http-backend` serves bare repositories to whoever
/// sends HTTP Basic credentials whose password is an access token the identity provider's
/// userinfo endpoint accepts, asked at every request. Anything else gets `401` with
/// `WWW-Authenticate: Basic realm="git"`, so git asks its credential helpers.
final class GitServer: Sendable {
    private let server: ServerProcess
    var port: Int { server.port }
    /// The folder of the bare repositories.
    let root: URL

    /// Starts the server and returns once it accepts connections, at most 30 s later.
    /// - Parameters:
    ///   - userinfo: the identity provider's userinfo endpoint, which judges every password.
    ///   - repositories: bare repositories made before it starts, each on branch `main` with one
    ///     commit that adds `README`.
    init(userinfo: String, repositories: [String] = ["repo.git"]) async throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("git-server-\(UUID().uuidString)")
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("git_server.py").path
        _ = try which("git", package: "git")
        server = try await ServerProcess("git server", executable: try which("python3", package: "python3"),
                                         arguments: [script, "--root", root.path, "--userinfo", userinfo] + repositories.flatMap { ["--init-repo", $0] },
                                         within: .seconds(30))
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: root)
    }

    func stop() { server.stop() }

    /// The server's origin, `http://127.0.0.1:PORT` (what `git-credential setup` takes).
    var origin: String { "http://127.0.0.1:\(port)" }

    /// The URL git clones `repository` from, with `user` and `password` in it when given
    /// (percent-encoded).
    func url(for repository: String, user: String? = nil, password: String? = nil) -> String {
        guard let user else { return "\(origin)/\(repository)" }
        let userInfo = ([user] + (password.map { [$0] } ?? []))
            .map { $0.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? $0 }.joined(separator: ":")
        return "http://\(userInfo)@127.0.0.1:\(port)/\(repository)"
    }

    /// What the server counted, control requests aside.
    struct Stats: Decodable, Sendable {
        /// Every request to a repository.
        let requests: Int
        /// Those answered `401`.
        let unauthorized: Int
        /// Those let through to `git http-backend`.
        let forwarded: Int
        /// Passwords sent to the provider's userinfo endpoint (one per request that had one).
        let userinfoChecks: Int
        /// The Basic user names, in the order first seen.
        let users: [String]
        /// The first 8 characters of each password (`GitServer.prefix(of:)`), in the order first seen.
        let passwords: [String]
    }

    func stats() async throws -> Stats { try await control.stats(Stats.self) }

    /// Every request to a repository: `method`, `path`, `query`, `status`, `user`, `password`
    /// (its first 8 characters), `gitProtocol` (the `Git-Protocol` header), `contentLength`,
    /// `chunked`, `seconds`, `time` (seconds since the epoch, when it arrived).
    func log() async throws -> [[String: Any]] { try await control.log() }

    /// How `stats()` and `log()` show `password`.
    static func prefix(of password: String) -> String { String(password.prefix(8)) }

    private var control: ControlEndpoint { ControlEndpoint("the git server", port: port) }
}

/// The real `git`, cut off from the machine's and the user's configuration: its global
/// configuration is a file of its own (`GIT_CONFIG_GLOBAL`, so `git config --global` writes
/// there), no system configuration, `HOME` a folder of its own, and it never prompts
/// (`GIT_TERMINAL_PROMPT=0`, no askpass program).
final class IsolatedGit: Sendable {
    /// The folder that is `HOME`; clones go wherever the caller says, often inside it.
    let home: URL
    /// The file that is git's global configuration.
    let globalConfig: URL
    /// More environment for every run (an authctl sandbox's bus, say).
    let extraEnvironment: [String: String]

    init(extraEnvironment: [String: String] = [:]) throws {
        self.extraEnvironment = extraEnvironment
        home = FileManager.default.temporaryDirectory.appendingPathComponent("git-home-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        globalConfig = home.appendingPathComponent("gitconfig")
        guard FileManager.default.createFile(atPath: globalConfig.path, contents: Data()) else { throw CocoaError(.fileWriteUnknown) }
    }

    deinit { try? FileManager.default.removeItem(at: home) }

    /// The environment every run gets: PATH and the locale from the test's, the rest git's own.
    var environment: [String: String] {
        let inherited = ProcessInfo.processInfo.environment
        var environment = ["PATH": inherited["PATH"] ?? "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"]
        environment["HOME"] = home.path
        environment["XDG_CONFIG_HOME"] = home.appendingPathComponent(".config").path
        environment["GIT_CONFIG_GLOBAL"] = globalConfig.path
        environment["GIT_CONFIG_NOSYSTEM"] = "1"
        environment["GIT_TERMINAL_PROMPT"] = "0"
        // An empty askpass means none: git would otherwise try SSH_ASKPASS or core.askPass.
        environment["GIT_ASKPASS"] = ""
        environment["SSH_ASKPASS"] = ""
        environment["GIT_AUTHOR_NAME"] = "Test"
        environment["GIT_AUTHOR_EMAIL"] = "test@example.org"
        environment["GIT_COMMITTER_NAME"] = "Test"
        environment["GIT_COMMITTER_EMAIL"] = "test@example.org"
        return environment.merging(extraEnvironment) { $1 }
    }

    /// Runs `git ARGUMENTS` (in `directory` when given, as `git -C`), without a terminal.
    func run(_ arguments: [String], in directory: URL? = nil, input: String? = nil, timeout: Double = 60) async throws -> Run {
        try await runProcess(try which("git", package: "git"), (directory.map { ["-C", $0.path] } ?? []) + arguments,
                             input: input.map { Array($0.utf8) }, environment: environment, timeout: timeout)
    }

    func run(_ arguments: String..., in directory: URL? = nil) async throws -> Run {
        try await run(arguments, in: directory)
    }
}
