// SPDX-License-Identifier: Apache-2.0
import DesktopSandbox
import Foundation
import TestSupport
import Testing

/// `docker-credential-authctl` as registry clients run it: the real skopeo (which reads `credHelpers`
/// and runs the helper for every registry client) against Debian's docker-registry, whose token
/// service takes only access tokens the real identity provider accepts — Support/ContainerRegistry.swift.
@Suite("Container registries with the session: docker-credential")
struct ContainerRegistryHelperTests {
    /// A signed-in session (Ada, device flow), a registry, and a skopeo whose Docker configuration
    /// `docker-credential setup` wrote.
    private struct Setting {
        let provider: IdentityProvider
        let registry: ContainerRegistry
        let scenario: Scenario
        let skopeo: Skopeo
    }

    private func signedIn(accessTokenLifetime: Duration = .seconds(300), setup: [String]? = []) async throws -> Setting {
        let provider = try await IdentityProvider(accessTokenLifetime: accessTokenLifetime, completeDiscovery: true)
        let registry = try await ContainerRegistry(userinfo: provider.userinfoEndpoint)
        var scenario = try await Scenario()
        let skopeo = try Skopeo(for: registry)
        try installHelper(for: scenario, in: skopeo)
        scenario.extraEnvironment["DOCKER_CONFIG"] = skopeo.credentialFile.deletingLastPathComponent().path
        try await scenario.bindDeviceClient(of: provider)
        try await scenario.signInWithDeviceFlow(at: provider)
        if let setup {
            let run = try await scenario.authctl(["docker-credential", "setup", registry.host] + setup)
            #expect(run.status == 0, "\(run)")
        }
        return Setting(provider: provider, registry: registry, scenario: scenario, skopeo: skopeo)
    }

    /// Puts `docker-credential-authctl` on skopeo's PATH: a script that gives authctl the scenario's
    /// settings and bus (skopeo's own `XDG_CONFIG_HOME` holds its containers configuration) and runs
    /// it through a symbolic link of that name, as `make install` puts one beside the binary.
    private func installHelper(for scenario: Scenario, in skopeo: Skopeo) throws {
        let links = skopeo.home.appendingPathComponent("authctl-bin")
        try FileManager.default.createDirectory(at: links, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: links.appendingPathComponent("docker-credential-authctl").path,
                                                   withDestinationPath: Scenario.binary)
        var exports = scenario.sandbox.environment
        exports["XDG_CONFIG_HOME"] = scenario.configHome
        let script = "#!/bin/sh\n" + exports.sorted { $0.key < $1.key }.map { "export \($0.key)=\(shellQuoted($0.value))\n" }.joined()
            + "exec \(shellQuoted(links.appendingPathComponent("docker-credential-authctl").path)) \"$@\"\n"
        guard FileManager.default.createFile(atPath: skopeo.credentialHelpers.appendingPathComponent("docker-credential-authctl").path,
                                             contents: Data(script.utf8), attributes: [.posixPermissions: 0o755]) else {
            throw CocoaError(.fileWriteUnknown)
        }
    }

    /// The Docker configuration skopeo reads.
    private func configuration(_ skopeo: Skopeo) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: skopeo.credentialFile)) as? [String: Any])
    }

    /// Waits until the session's access token has expired by the local clock (at most 30 s).
    private func accessTokenExpires(_ scenario: Scenario) async throws {
        let expired = await eventually(within: .seconds(30), pollingEvery: .milliseconds(200)) {
            guard let status = try? await scenario.authctl("status", "--json").stdout,
                  let object = try? JSONSerialization.jsonObject(with: Data(status.utf8)) as? [String: Any],
                  let expiry = (object["accessTokenExpiresAt"] as? String).flatMap(ISO8601DateFormatter().date(from:)) else { return false }
            return expiry < Date()
        }
        try #require(expired)
    }

    @Test("setup sets credHelpers in the Docker configuration and records the registry; twice changes nothing")
    func setup() async throws {
        let setting = try await signedIn()
        #expect(try configuration(setting.skopeo)["credHelpers"] as? [String: String] == [setting.registry.host: "authctl"])
        let settings = try String(contentsOfFile: setting.scenario.settingsFile, encoding: .utf8)
        #expect(settings.contains("registries=\(setting.registry.host);\n"), "\(settings)")
        let before = try Data(contentsOf: setting.skopeo.credentialFile)
        let again = try await setting.scenario.authctl("docker-credential", "setup", "HTTP://\(setting.registry.host.uppercased())/v2/")
        #expect(again.status == 0, "\(again)")
        #expect(again.stdout.contains("already"), "\(again)")
        #expect(try Data(contentsOf: setting.skopeo.credentialFile) == before)
        #expect(try String(contentsOfFile: setting.scenario.settingsFile, encoding: .utf8) == settings)
    }

    @Test("skopeo inspects and pulls with the session's access token, the account id as user name")
    func pull() async throws {
        let setting = try await signedIn()
        let inspect = try await setting.skopeo.inspect(setting.registry.seededReference)
        #expect(inspect.status == 0, "\(inspect)")
        let target = setting.skopeo.home.appendingPathComponent("pulled").path
        let copy = try await setting.skopeo.copy(from: setting.registry.seededReference, to: "oci:\(target)")
        #expect(copy.status == 0, "\(copy)")
        let token = try await setting.scenario.authctl("token").output
        let stats = try await setting.registry.stats()
        #expect(stats.unauthorized == 0)
        #expect(stats.users == ["ada@example.org"])
        #expect(stats.passwords == [ContainerRegistry.prefix(of: token)])
    }

    @Test("a registry set up with --username gets that user name; list shows it")
    func fixedUserName() async throws {
        let setting = try await signedIn(setup: ["--username", "oauth2accesstoken"])
        let inspect = try await setting.skopeo.inspect(setting.registry.seededReference, tags: false)
        #expect(inspect.status == 0, "\(inspect)")
        #expect(try await setting.registry.stats().users == ["oauth2accesstoken"])
        let list = try await setting.scenario.authctl("docker-credential", "list")
        #expect(list.status == 0, "\(list)")
        #expect(try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [String: String]
                == [setting.registry.host: "oauth2accesstoken"])
    }

    @Test("get answers the protocol's JSON for the registry as sent; erase makes the next get refresh the token")
    func getAndErase() async throws {
        let setting = try await signedIn()
        let sent = "  https://\(setting.registry.host.uppercased())/v2/ \n"
        let get = try await setting.scenario.authctl(["docker-credential", "get"], input: Array(sent.utf8))
        #expect(get.status == 0, "\(get)")
        let answer = try #require(try JSONSerialization.jsonObject(with: Data(get.stdout.utf8)) as? [String: String])
        let token = try await setting.scenario.authctl("token").output
        #expect(answer == ["ServerURL": "https://\(setting.registry.host.uppercased())/v2/", "Username": "ada@example.org", "Secret": token])

        let refreshes = try await setting.provider.count("refresh")
        let erase = try await setting.scenario.authctl(["docker-credential", "erase"], input: Array(setting.registry.host.utf8))
        #expect(erase.status == 0, "\(erase)")
        #expect(erase.stdout.isEmpty)
        let inspect = try await setting.skopeo.inspect(setting.registry.seededReference, tags: false)
        #expect(inspect.status == 0, "\(inspect)")
        #expect(try await setting.provider.count("refresh") == refreshes + 1)
        #expect(try await setting.scenario.authctl("token").output != token)

        let store = try await setting.scenario.authctl(["docker-credential", "store"],
                                                       input: Array(#"{"ServerURL":"x","Username":"u","Secret":"s"}"#.utf8))
        #expect(store.status == 0 && store.stdout.isEmpty, "\(store)")
    }

    @Test("six pulls at once over an expired token: one refresh at the provider, and every one pulls")
    func concurrentPulls() async throws {
        let setting = try await signedIn(accessTokenLifetime: .seconds(3))
        let refreshes = try await setting.provider.count("refresh")
        try await accessTokenExpires(setting.scenario)
        // The refresh's token outlives the six, however slow the machine: each finds it fresh.
        try await setting.provider.configure(["ACCESS_TOKEN_EXPIRE_SECONDS": 300])
        let runs = try await withThrowingTaskGroup(of: Run.self) { group in
            for index in 0..<6 {
                let target = setting.skopeo.home.appendingPathComponent("pulled-\(index)").path
                group.addTask { try await setting.skopeo.copy(from: setting.registry.seededReference, to: "oci:\(target)") }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        for run in runs { #expect(run.status == 0, "\(run)") }
        #expect(try await setting.provider.count("refresh") == refreshes + 1)
        #expect(try await setting.registry.stats().unauthorized == 0)
    }

    @Test("a registry nobody serves: the protocol's not-found line, exit 1, and skopeo goes on without credentials")
    func unknownRegistry() async throws {
        let setting = try await signedIn(setup: nil)
        try setting.skopeo.writeCredentials(helpers: [setting.registry.host: "authctl"])
        let get = try await setting.scenario.authctl(["docker-credential", "get"], input: Array(setting.registry.host.utf8))
        #expect(get.status == 1)
        #expect(get.stdout == "credentials not found in native keychain\n")
        #expect(get.stderr.isEmpty, "\(get)")
        let erase = try await setting.scenario.authctl(["docker-credential", "erase"], input: Array("registry.example.org".utf8))
        #expect(erase.status == 1 && erase.stdout == "credentials not found in native keychain\n", "\(erase)")
        let inspect = try await setting.skopeo.inspect(setting.registry.seededReference, tags: false)
        #expect(inspect.status != 0)
        #expect(inspect.stderr.contains("credentials are required"), "\(inspect)")
        #expect(try await setting.registry.stats().users.isEmpty)
    }

    @Test("nobody signed in: not found, exit 1, and one line on stderr with the sign-in to run")
    func nobodySignedIn() async throws {
        let setting = try await signedIn()
        #expect(try await setting.scenario.authctl("sign-out").status == 0)
        let get = try await setting.scenario.authctl(["docker-credential", "get"], input: Array(setting.registry.host.utf8))
        #expect(get.status == 1)
        #expect(get.stdout == "credentials not found in native keychain\n")
        #expect(get.stderr.split(separator: "\n").count == 1, "\(get)")
        #expect(get.stderr.contains("`authctl --service \(setting.scenario.service) sign-in`"), "\(get)")
        let list = try await setting.scenario.authctl("docker-credential", "list")
        #expect(list.stdout == "{}\n", "\(list)")
    }

    @Test("setup refuses an unbound service, a registry another service serves, and a configuration that is not a JSON object (65), changing nothing")
    func setupRefusals() async throws {
        let setting = try await signedIn()
        let configuration = try Data(contentsOf: setting.skopeo.credentialFile)
        // Another service of the same settings file.
        var sameFile = setting.scenario
        sameFile.extraEnvironment["AUTHCTL_SERVICE"] = "other-" + setting.scenario.service
        let unbound = try await sameFile.authctl("docker-credential", "setup", "registry.example.org")
        #expect(unbound.status == 65, "\(unbound)")
        #expect(try await sameFile.authctl("server", "set", "https://tokens.example.org/token", "--protocol", "oauth2").status == 0)
        let invalid = try await sameFile.authctl("docker-credential", "setup", "user@registry.example.org")
        #expect(invalid.status == 65, "\(invalid)")
        let served = try await sameFile.authctl("docker-credential", "setup", setting.registry.host)
        #expect(served.status == 65, "\(served)")
        #expect(served.stderr.contains(setting.scenario.service), "\(served)")
        #expect(try Data(contentsOf: setting.skopeo.credentialFile) == configuration)

        for contents in ["[1,2]", #"{"credHelpers":["x"]}"#, "{nope"] {
            try Data(contents.utf8).write(to: setting.skopeo.credentialFile)
            let run = try await sameFile.authctl("docker-credential", "setup", "registry.example.org")
            #expect(run.status == 65, "\(run)")
            #expect(try Data(contentsOf: setting.skopeo.credentialFile) == Data(contents.utf8))
        }
        // A Docker configuration that cannot be written (74): the registry is not left in the settings.
        let unwritable = try await sameFile.authctl("docker-credential", "setup", "registry.example.org", "--config", "/dev/null/config.json")
        #expect(unwritable.status == 74, "\(unwritable)")
        #expect(try !String(contentsOfFile: setting.scenario.settingsFile, encoding: .utf8).contains("registry.example.org"))
    }

    @Test("a request over 64 KiB, or not UTF-8, is refused (65) with nothing on stdout")
    func hostileRequests() async throws {
        let scenario = try await Scenario()
        for input in [[UInt8](repeating: 0x61, count: 70_000), [0xFF, 0xFE, 0x00]] {
            let run = try await scenario.authctl(["docker-credential", "get"], input: input)
            #expect(run.status == 65, "\(run)")
            #expect(run.stdout.isEmpty)
        }
    }
}
