// SPDX-License-Identifier: Apache-2.0
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// A container registry on 127.0.0.1 (`container_registry.py` beside this file), started by the
/// test that needs it and stopped with it: Debian's real `docker-registry` (distribution 2.8)
/// with token authentication, whose token service hands registry tokens to whoever sends HTTP
/// Basic credentials whose password is an access token the identity provider's userinfo
/// endpoint accepts, asked at every token request. No credentials, or any other password, get
/// `401`. The registry speaks plain HTTP: ``Skopeo`` counts it as insecure, so containers/image
/// falls back from HTTPS to HTTP.
final class ContainerRegistry: Sendable {
    private let server: ServerProcess
    /// The registry's port.
    var port: Int { server.port }
    /// The token service's port, where the control endpoints are too.
    let tokenPort: Int
    /// The folder of the registry's storage, configuration, token certificate and log.
    let folder: URL

    /// What `--seed` pushes unless told otherwise.
    static let seededRepository = "seeded/hello"
    static let seededTag = "1"

    /// Starts the registry and its token service and returns once both accept connections, at
    /// most 60 s later.
    /// - Parameters:
    ///   - userinfo: the identity provider's userinfo endpoint, which judges every password.
    ///   - seeds: `NAME:TAG` of tiny images (one layer holding `/hello.txt`) pushed before it
    ///     starts; the same bytes every run.
    init(userinfo: String, seeds: [String] = ["\(seededRepository):\(seededTag)"]) async throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("container-registry-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("container_registry.py").path
        _ = try which("docker-registry", package: "docker-registry")
        let folder = folder
        // Python with `cryptography` (the provider's environment): the start is slow, so it takes a slot.
        server = try await ServerProcess("container registry", executable: try IdentityProvider.python(),
                                         arguments: [script, "--dir", folder.path, "--userinfo", userinfo] + seeds.flatMap { ["--seed", $0] },
                                         within: .seconds(60), slow: true) {
            let registry = (try? String(contentsOf: folder.appendingPathComponent("registry.log"), encoding: .utf8)) ?? ""
            return registry.isEmpty ? "" : "registry.log:\n" + String(registry.suffix(2000))
        }
        // Written before `listening`, so it is there now.
        let written = try String(contentsOf: folder.appendingPathComponent("token-port"), encoding: .utf8)
        tokenPort = try #require(Int(written.trimmingCharacters(in: .whitespacesAndNewlines)), "token-port: \(written)")
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: folder)
    }

    /// Stops the token service, which stops the registry.
    func stop() { server.stop() }

    /// `127.0.0.1:PORT`: the registry's name in image references, in `credHelpers` and
    /// `auths` keys, and what skopeo sends a credential helper.
    var host: String { "127.0.0.1:\(port)" }

    /// skopeo's reference to `repository` (`NAME:TAG` or `NAME@DIGEST`) at this registry.
    func reference(_ repository: String) -> String { "docker://\(host)/\(repository)" }

    /// The seeded image's reference.
    var seededReference: String { reference("\(Self.seededRepository):\(Self.seededTag)") }

    /// The token service's endpoint, the registry's `realm`.
    var realm: String { "http://127.0.0.1:\(tokenPort)/token" }

    /// What the token service counted, control requests and seeding aside.
    struct Stats: Decodable, Sendable {
        /// Every request to `/token`.
        let tokenRequests: Int
        /// Those answered `401` (no credentials, malformed ones, or a password the provider refused).
        let unauthorized: Int
        /// Those answered with a registry token.
        let issued: Int
        /// Passwords sent to the provider's userinfo endpoint (one per token request that had one).
        let userinfoChecks: Int
        /// The Basic user names, in the order first seen.
        let users: [String]
        /// The first 8 characters of each password (`ContainerRegistry.prefix(of:)`), in the order first seen.
        let passwords: [String]
    }

    func stats() async throws -> Stats { try await control.stats(Stats.self) }

    /// Every token request: `time` (seconds since the epoch, when it arrived), `user` and
    /// `password` (its first 8 characters; both `NSNull` without credentials), `account` and
    /// `service` (the query's), `scopes` (every `scope` parameter, e.g.
    /// `repository:seeded/hello:pull`), `status`, `seconds`.
    func log() async throws -> [[String: Any]] { try await control.log() }

    /// How `stats()` and `log()` show `password`.
    static func prefix(of password: String) -> String { String(password.prefix(8)) }

    /// The registry's own log (distribution's request lines), for a failure's message.
    var registryLog: String {
        (try? String(contentsOf: folder.appendingPathComponent("registry.log"), encoding: .utf8)) ?? ""
    }

    private var control: ControlEndpoint { ControlEndpoint("the container registry's token service", port: tokenPort) }
}

/// The real `skopeo` (1.9.3, containers/image 5.23), cut off from the machine's and the user's
/// configuration: `HOME`, `XDG_CONFIG_HOME`, `XDG_RUNTIME_DIR` and `TMPDIR` are folders of its
/// own, so containers/image reads its per-user `registries.conf` (the given registries insecure:
/// plain HTTP; it then ignores /etc's and its drop-ins), `policy.json` (accept anything) and an
/// empty `registries.d` (no signature storage) from `HOME/.config/containers`. The credential
/// file — the one with `credHelpers` — lies where ``CredentialFile`` says, and `PATH` starts with
/// a folder of its own where `docker-credential-NAME` programs are linked.
struct Skopeo: Sendable {
    /// Where the credential file (`auths`, `credHelpers`) that ``writeCredentials(helpers:auths:)``
    /// writes lies. containers/image 5.23 reads `credHelpers` from every one of them, in this
    /// order, stopping at the first that answers credentials: the file of `REGISTRY_AUTH_FILE`
    /// (`--authfile`) or else `$XDG_RUNTIME_DIR/containers/auth.json`, then
    /// `$XDG_CONFIG_HOME/containers/auth.json`, then `$DOCKER_CONFIG/config.json` or else
    /// `$HOME/.docker/config.json` (`~/.dockercfg` last, `auths` only).
    enum CredentialFile: String, CaseIterable, Sendable, CustomStringConvertible {
        /// `$DOCKER_CONFIG/config.json`.
        case dockerConfig
        /// `$HOME/.docker/config.json`, `DOCKER_CONFIG` unset: Docker's own default.
        case homeDocker
        /// The file `REGISTRY_AUTH_FILE` names (skopeo's `--authfile` default).
        case registryAuthFile
        /// `$XDG_RUNTIME_DIR/containers/auth.json`: what `skopeo login` writes.
        case runtimeDirectory
        /// `$XDG_CONFIG_HOME/containers/auth.json`.
        case configHome

        var description: String { rawValue }
    }

    private let folder: OwnedFolder
    /// The folder that is `HOME`.
    var home: URL { folder.url }
    /// The folder first in `PATH`, where ``linkCredentialHelper(_:to:)`` puts `docker-credential-NAME`.
    var credentialHelpers: URL { home.appendingPathComponent("credential-helpers") }
    /// The credential file skopeo reads (see ``CredentialFile``).
    let credentialFile: URL
    private let location: CredentialFile
    /// More environment for every run.
    let extraEnvironment: [String: String]

    /// - Parameters:
    ///   - insecure: registries (`HOST:PORT`) reached over plain HTTP.
    ///   - credentialFile: where the credential file lies.
    init(insecure registries: [String], credentialFile location: CredentialFile = .dockerConfig,
         extraEnvironment: [String: String] = [:]) throws {
        folder = try OwnedFolder(prefix: "skopeo-home")
        self.location = location
        self.extraEnvironment = extraEnvironment
        let home = folder.url
        let containers = home.appendingPathComponent(".config/containers")
        for made in [containers.appendingPathComponent("registries.d"), home.appendingPathComponent("credential-helpers"),
                     home.appendingPathComponent("tmp")] {
            try FileManager.default.createDirectory(at: made, withIntermediateDirectories: true)
        }
        // containers/image skips, with a warning, the auth.json of an XDG_RUNTIME_DIR that does not exist; 0700 as pam_systemd makes it.
        try FileManager.default.createDirectory(at: home.appendingPathComponent("run"), withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        let registriesConf = (["unqualified-search-registries = []"]
            + registries.map { "\n[[registry]]\nlocation = \"\($0)\"\ninsecure = true" }).joined(separator: "\n") + "\n"
        try Data(registriesConf.utf8).write(to: containers.appendingPathComponent("registries.conf"))
        try Data(#"{"default": [{"type": "insecureAcceptAnything"}]}"#.utf8).write(to: containers.appendingPathComponent("policy.json"))
        credentialFile = switch location {
        case .dockerConfig: home.appendingPathComponent("docker-config/config.json")
        case .homeDocker: home.appendingPathComponent(".docker/config.json")
        case .registryAuthFile: home.appendingPathComponent("registry-auth.json")
        case .runtimeDirectory: home.appendingPathComponent("run/containers/auth.json")
        case .configHome: containers.appendingPathComponent("auth.json")
        }
        try FileManager.default.createDirectory(at: credentialFile.deletingLastPathComponent(), withIntermediateDirectories: true)
    }

    /// A skopeo for `registry`.
    init(for registry: ContainerRegistry, credentialFile location: CredentialFile = .dockerConfig,
         extraEnvironment: [String: String] = [:]) throws {
        try self.init(insecure: [registry.host], credentialFile: location, extraEnvironment: extraEnvironment)
    }

    /// The environment every run gets: the locale and PATH (after ``credentialHelpers``) from the
    /// test's, the rest skopeo's own.
    var environment: [String: String] {
        let inherited = ProcessInfo.processInfo.environment
        var environment = ["LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"]
        environment["PATH"] = credentialHelpers.path + ":" + (inherited["PATH"] ?? "/usr/bin:/bin")
        environment["HOME"] = home.path
        environment["XDG_CONFIG_HOME"] = home.appendingPathComponent(".config").path
        environment["XDG_RUNTIME_DIR"] = home.appendingPathComponent("run").path
        // Where a non-root skopeo keeps its blob-info cache; as root it is /var/lib/containers/cache whatever the environment.
        environment["XDG_DATA_HOME"] = home.appendingPathComponent(".local/share").path
        environment["TMPDIR"] = home.appendingPathComponent("tmp").path
        switch location {
        case .dockerConfig: environment["DOCKER_CONFIG"] = credentialFile.deletingLastPathComponent().path
        case .registryAuthFile: environment["REGISTRY_AUTH_FILE"] = credentialFile.path
        case .homeDocker, .runtimeDirectory, .configHome: break
        }
        return environment.merging(extraEnvironment) { $1 }
    }

    /// Writes the credential file: `credHelpers` (registry → helper NAME, which runs
    /// `docker-credential-NAME`) and `auths` (registry → user and password, base64 as Docker
    /// writes them).
    func writeCredentials(helpers: [String: String] = [:], auths: [String: (user: String, password: String)] = [:]) throws {
        var file: [String: Any] = [:]
        if !helpers.isEmpty { file["credHelpers"] = helpers }
        if !auths.isEmpty {
            file["auths"] = auths.mapValues { ["auth": Data("\($0.user):\($0.password)".utf8).base64EncodedString()] }
        }
        try JSONSerialization.data(withJSONObject: file, options: [.prettyPrinted, .sortedKeys]).write(to: credentialFile)
    }

    /// Links `docker-credential-NAME` in ``credentialHelpers`` to `program`, so a `credHelpers`
    /// entry naming NAME runs it.
    func linkCredentialHelper(_ name: String, to program: String) throws {
        let link = credentialHelpers.appendingPathComponent("docker-credential-\(name)")
        try? FileManager.default.removeItem(at: link)
        try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: program)
    }

    /// Runs `skopeo ARGUMENTS` without a terminal.
    func run(_ arguments: [String], input: String? = nil, timeout: Double = 60) async throws -> Run {
        try await runProcess(try which("skopeo", package: "skopeo"), arguments, input: input.map { Array($0.utf8) },
                             environment: environment, timeout: timeout)
    }

    func run(_ arguments: String...) async throws -> Run {
        try await run(arguments)
    }

    /// `skopeo inspect REFERENCE`, with `--creds USER:PASSWORD` when given (else skopeo looks in
    /// its credential files and helpers). Without `tags`, `--no-tags`: one registry client, so one
    /// credential lookup instead of two.
    func inspect(_ reference: String, creds: String? = nil, tags: Bool = true) async throws -> Run {
        try await run(["inspect"] + (creds.map { ["--creds", $0] } ?? []) + (tags ? [] : ["--no-tags"]) + [reference])
    }

    /// `skopeo copy SOURCE DESTINATION`, with `--src-creds` and `--dest-creds` when given.
    func copy(from source: String, to destination: String, creds: String? = nil) async throws -> Run {
        try await run(["copy", "--quiet"] + (creds.map { ["--src-creds", $0, "--dest-creds", $0] } ?? []) + [source, destination])
    }
}

/// A temporary folder removed when the last value holding it goes.
private final class OwnedFolder: Sendable {
    let url: URL

    init(prefix: String) throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: url) }
}
