// SPDX-License-Identifier: Apache-2.0
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// The container registry the credential-helper tests pull from (Support/ContainerRegistry.swift)
/// serves the real `skopeo` to an access token the identity provider accepts, and to nothing
/// else; and skopeo takes that token from a Docker credential helper named in `credHelpers`, as
/// it will take it from authctl.
@Suite("The test container registry")
struct ContainerRegistryTests {
    /// A provider, a registry that asks it, and an access token of Ada's: the device flow's, refreshed
    /// once (`IdentityProvider.signIn`).
    private struct Setting {
        let provider: IdentityProvider
        let registry: ContainerRegistry
        let token: String
    }

    private func setting() async throws -> Setting {
        let provider = try await IdentityProvider()
        let registry = try await ContainerRegistry(userinfo: provider.userinfoEndpoint)
        return Setting(provider: provider, registry: registry, token: try await provider.signIn().accessToken)
    }

    /// What `skopeo inspect` printed, as JSON.
    private func image(_ run: Run) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], "\(run)")
    }

    // MARK: Plain credentials

    @Test("with --creds USER:ACCESS_TOKEN skopeo inspects the seeded image and copies it to a new repository, every token asked of the provider")
    func plainCredentials() async throws {
        let setting = try await setting()
        let registry = setting.registry
        let skopeo = try Skopeo(for: registry)
        let creds = "ada:\(setting.token)"
        let inspected = try await skopeo.inspect(registry.seededReference, creds: creds)
        #expect(inspected.status == 0, "\(inspected)")
        let seeded = try image(inspected)
        #expect(seeded["Name"] as? String == "\(registry.host)/\(ContainerRegistry.seededRepository)")
        #expect(seeded["RepoTags"] as? [String] == [ContainerRegistry.seededTag])
        #expect((seeded["Labels"] as? [String: String])?["org.example.seeded"] == "seeded/hello:1")
        let digest = try #require(seeded["Digest"] as? String)

        let copy = registry.reference("copied/hello:2")
        let copied = try await skopeo.copy(from: registry.seededReference, to: copy, creds: creds)
        #expect(copied.status == 0, "\(copied)")
        let inspectedCopy = try await skopeo.inspect(copy, creds: creds, tags: false)
        #expect(inspectedCopy.status == 0, "\(inspectedCopy)")
        // Registry to registry, the manifest travels unchanged.
        #expect(try image(inspectedCopy)["Digest"] as? String == digest)

        let stats = try await registry.stats()
        #expect(stats.unauthorized == 0)
        #expect(stats.issued == stats.tokenRequests)
        #expect(stats.userinfoChecks == stats.tokenRequests)
        #expect(stats.users == ["ada"])
        #expect(stats.passwords == [ContainerRegistry.prefix(of: setting.token)])
        let log = try await registry.log()
        #expect(log.allSatisfy { $0["account"] as? String == "ada" && $0["service"] as? String == "authctl-test-registry" }, "\(log)")
        #expect(log.contains { $0["scopes"] as? [String] == ["repository:copied/hello:pull,push"] }, "\(log)")
    }

    @Test("a password the provider does not take is refused: skopeo says invalid username/password, and no registry token is issued")
    func wrongToken() async throws {
        let setting = try await setting()
        let skopeo = try Skopeo(for: setting.registry)
        let run = try await skopeo.inspect(setting.registry.seededReference, creds: "ada:not-a-token")
        #expect(run.status == 1)
        #expect(run.stderr.contains("unable to retrieve auth token: invalid username/password: unauthorized: "
                                    + "an access token of the identity provider is required"), "\(run)")
        let stats = try await setting.registry.stats()
        #expect(stats.tokenRequests == 1)
        #expect(stats.unauthorized == 1)
        #expect(stats.issued == 0)
        #expect(stats.userinfoChecks == 1)
    }

    @Test("a token revoked after an inspect is refused at the very next token request")
    func revokedToken() async throws {
        let setting = try await setting()
        let skopeo = try Skopeo(for: setting.registry)
        let creds = "ada:\(setting.token)"
        let before = try await skopeo.inspect(setting.registry.seededReference, creds: creds, tags: false)
        #expect(before.status == 0, "\(before)")
        let revocation = try await IdentityProvider.json(setting.provider.revocationEndpoint, form: ["token": setting.token, "client_id": IdentityProvider.deviceClientID])
        #expect(revocation.status == 200)
        let after = try await skopeo.inspect(setting.registry.seededReference, creds: creds, tags: false)
        #expect(after.status == 1)
        #expect(after.stderr.contains("invalid username/password"), "\(after)")
        let statuses = try await setting.registry.log().map { $0["status"] as? Int }
        #expect(statuses == [200, 401])
    }

    @Test("without credentials skopeo asks for a token anonymously, which is refused without asking the provider")
    func noCredentials() async throws {
        let setting = try await setting()
        let skopeo = try Skopeo(for: setting.registry)
        let run = try await skopeo.inspect(setting.registry.seededReference)
        #expect(run.status == 1)
        #expect(run.stderr.contains("invalid username/password: unauthorized: credentials are required"), "\(run)")
        let log = try await setting.registry.log()
        #expect(log.count == 1)
        #expect(log.first?["user"] is NSNull, "\(log)")
        #expect(log.first?["account"] is NSNull, "\(log)")
        #expect(try await setting.registry.stats().userinfoChecks == 0)
    }

    // MARK: A credential helper

    @Test("skopeo runs `docker-credential-NAME get` for a credHelpers entry in each credential file it reads, sending the registry as HOST:PORT, no scheme, no newline",
          arguments: Skopeo.CredentialFile.allCases)
    func credentialHelper(file: Skopeo.CredentialFile) async throws {
        let setting = try await setting()
        let registry = setting.registry
        let skopeo = try Skopeo(for: registry, credentialFile: file)
        let standIn = try CredentialHelperStandIn(for: skopeo)
        try standIn.answer(serverURL: registry.host, user: "helper-user", secret: setting.token)
        try skopeo.writeCredentials(helpers: [registry.host: CredentialHelperStandIn.name])
        let run = try await skopeo.inspect(registry.seededReference)
        #expect(run.status == 0, "\(run)")
        let calls = try standIn.calls()
        // One registry client for the image and one for its tags, each looking its credentials up.
        #expect(calls.count == 2, "\(calls)")
        for call in calls {
            #expect(call.arguments == ["get"])
            #expect(call.stdin == Data(registry.host.utf8), "\(String(decoding: call.stdin, as: UTF8.self))")
        }
        let stats = try await registry.stats()
        #expect(stats.users == ["helper-user"])
        #expect(stats.passwords == [ContainerRegistry.prefix(of: setting.token)])
        #expect(stats.unauthorized == 0)
    }

    @Test("a copy within the registry asks the helper once per image reference, one call after the other, and never lists, stores or erases")
    func helperCallsOfACopy() async throws {
        let setting = try await setting()
        let registry = setting.registry
        let skopeo = try Skopeo(for: registry)
        let standIn = try CredentialHelperStandIn(for: skopeo)
        try standIn.answer(serverURL: registry.host, user: "helper-user", secret: setting.token)
        try skopeo.writeCredentials(helpers: [registry.host: CredentialHelperStandIn.name])
        let run = try await skopeo.copy(from: registry.seededReference, to: registry.reference("copied/hello:2"))
        #expect(run.status == 0, "\(run)")
        let calls = try standIn.calls()
        #expect(calls.map(\.arguments) == [["get"], ["get"]])
        #expect(calls.allSatisfy { $0.stdin == Data(registry.host.utf8) })
        for (earlier, later) in zip(calls, calls.dropFirst()) {
            #expect(earlier.ended <= later.started, "the helper ran twice at once: \(calls)")
        }
        let scopes = try await registry.log().compactMap { $0["scopes"] as? [String] }
        #expect(scopes.contains(["repository:copied/hello:pull,push"]), "\(scopes)")
    }

    @Test("a helper answering `credentials not found in native keychain` with exit 1 makes skopeo go on anonymously, and the token service refuses it")
    func helperFindsNothing() async throws {
        let setting = try await setting()
        let registry = setting.registry
        let skopeo = try Skopeo(for: registry)
        let standIn = try CredentialHelperStandIn(for: skopeo)
        try skopeo.writeCredentials(helpers: [registry.host: CredentialHelperStandIn.name])
        let run = try await skopeo.inspect(registry.seededReference)
        #expect(run.status == 1)
        #expect(run.stderr.contains("unable to retrieve auth token: invalid username/password: unauthorized: credentials are required"), "\(run)")
        #expect(try standIn.calls().map(\.arguments) == [["get"]])
        let log = try await registry.log()
        #expect(log.count == 1)
        #expect(log.first?["user"] is NSNull, "\(log)")
        #expect(try await registry.stats().userinfoChecks == 0)
    }

    @Test("after a helper's not found, skopeo takes the auths entry of a credential file it reads later")
    func helperNotFoundFallsThrough() async throws {
        let setting = try await setting()
        let registry = setting.registry
        let skopeo = try Skopeo(for: registry, credentialFile: .dockerConfig)
        let standIn = try CredentialHelperStandIn(for: skopeo)
        // $XDG_RUNTIME_DIR/containers/auth.json is read before $DOCKER_CONFIG/config.json.
        let earlier = skopeo.home.appendingPathComponent("run/containers/auth.json")
        try FileManager.default.createDirectory(at: earlier.deletingLastPathComponent(), withIntermediateDirectories: true)
        try JSONSerialization.data(withJSONObject: ["credHelpers": [registry.host: CredentialHelperStandIn.name]]).write(to: earlier)
        try skopeo.writeCredentials(auths: [registry.host: (user: "file-user", password: setting.token)])
        let run = try await skopeo.inspect(registry.seededReference, tags: false)
        #expect(run.status == 0, "\(run)")
        #expect(try standIn.calls().map(\.arguments) == [["get"]])
        #expect(try await registry.stats().users == ["file-user"])
    }

    @Test("a helper failing with any other message stops skopeo before it asks for a token, quoting what the helper printed")
    func helperFails() async throws {
        let setting = try await setting()
        let registry = setting.registry
        let skopeo = try Skopeo(for: registry)
        let standIn = try CredentialHelperStandIn(for: skopeo)
        try standIn.fail(saying: "the keyring is locked")
        try skopeo.writeCredentials(helpers: [registry.host: CredentialHelperStandIn.name])
        let run = try await skopeo.inspect(registry.seededReference)
        #expect(run.status == 1)
        #expect(run.stderr.contains("error getting credentials - err: exit status 1, out: `the keyring is locked`"), "\(run)")
        #expect(try standIn.calls().count == 1)
        #expect(try await registry.stats().tokenRequests == 0)
    }
}

/// A Docker credential helper in a few lines of shell, linked as `docker-credential-standin` in
/// a ``Skopeo``'s helper folder: it records every call (arguments, the exact bytes on stdin, when
/// it started and ended) and answers `get` with the credentials it was given, or fails as told,
/// or else says `credentials not found in native keychain` and exits 1, as Docker's helpers do.
private struct CredentialHelperStandIn {
    static let name = "standin"
    let folder: URL

    struct Call: CustomStringConvertible {
        let arguments: [String]
        let stdin: Data
        /// Nanoseconds since the epoch.
        let started: UInt64
        let ended: UInt64

        var description: String { "\(arguments) <\(String(decoding: stdin, as: UTF8.self))> \(started)…\(ended)" }
    }

    init(for skopeo: Skopeo) throws {
        folder = skopeo.home.appendingPathComponent("stand-in")
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("calls"), withIntermediateDirectories: true)
        let quoted = "'" + folder.path.replacingOccurrences(of: "'", with: "'\\''") + "'"
        let script = """
            #!/bin/sh
            folder=\(quoted)
            call="$folder/calls/$(date +%s%N)-$$"
            mkdir "$call"
            date +%s%N > "$call/started"
            printf '%s\\n' "$@" > "$call/arguments"
            cat > "$call/stdin"
            status=1
            if [ "$1" = get ] && [ -f "$folder/answer" ]; then
                cat "$folder/answer"
                status=0
            elif [ -f "$folder/failure" ]; then
                cat "$folder/failure"
            else
                echo "credentials not found in native keychain"
            fi
            date +%s%N > "$call/ended"
            exit $status

            """
        let program = folder.appendingPathComponent("helper")
        try Data(script.utf8).write(to: program)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: program.path)
        try skopeo.linkCredentialHelper(Self.name, to: program.path)
    }

    /// `get` answers these credentials from now on.
    func answer(serverURL: String, user: String, secret: String) throws {
        try JSONSerialization.data(withJSONObject: ["ServerURL": serverURL, "Username": user, "Secret": secret])
            .write(to: folder.appendingPathComponent("answer"))
    }

    /// Every call prints `message` and exits 1 from now on (unless it has an answer).
    func fail(saying message: String) throws {
        try Data((message + "\n").utf8).write(to: folder.appendingPathComponent("failure"))
    }

    /// The calls so far, in the order they started.
    func calls() throws -> [Call] {
        let calls = folder.appendingPathComponent("calls")
        return try FileManager.default.contentsOfDirectory(atPath: calls.path).map { name in
            let call = calls.appendingPathComponent(name)
            func time(_ file: String) throws -> UInt64 {
                let text = try String(contentsOf: call.appendingPathComponent(file), encoding: .utf8)
                return try #require(UInt64(text.trimmingCharacters(in: .whitespacesAndNewlines)), "\(file) of \(name): \(text)")
            }
            let arguments = try String(contentsOf: call.appendingPathComponent("arguments"), encoding: .utf8)
            return Call(arguments: arguments.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init),
                        stdin: try Data(contentsOf: call.appendingPathComponent("stdin")),
                        started: try time("started"), ended: try time("ended"))
        }.sorted { $0.started < $1.started }
    }
}
