// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthControllerCore
import SystemPackage

/// `authctl docker-credential get|store|erase|list`: the Docker credential helper protocol, which
/// docker, podman, skopeo and buildah speak to `docker-credential-authctl` (the same program under
/// that name); `docker-credential setup REGISTRY` names it in the Docker configuration.
struct DockerCredential: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "docker-credential",
        abstract: "Give container registries the access token of the signed-in account (a Docker credential helper).",
        discussion: """
            `authctl docker-credential setup REGISTRY` lets the service's session sign in to \
            REGISTRY (HOST[:PORT]): it adds REGISTRY to the service's registries and sets \
            credHelpers.REGISTRY to `authctl` in the Docker configuration \
            ($DOCKER_CONFIG/config.json, else ~/.docker/config.json; --config names another), \
            keeping the rest of the file. docker, podman, skopeo and buildah then run \
            `docker-credential-authctl get` (a link to authctl that `make install` puts beside it), \
            which answers with the user name (--username at set-up, else the account id) and the \
            access token as `authctl token` prints it, refreshed when due. Every service's \
            registries are searched, whatever --service says.
            A registry nobody serves, or whose service has nobody signed in: "credentials not found \
            in native keychain", exit 1. `store` changes nothing (the token belongs to the session); \
            `erase` makes the next `get` refresh the token; `list` prints every registry of every \
            signed-in service with its user name. It never prompts and never opens a browser.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: ArgumentHelp("get, store, erase, list (the protocol's actions), or setup.", valueName: "action"))
    var action: String

    @Argument(help: ArgumentHelp("For setup: the registry, HOST[:PORT] (or a URL of it).", valueName: "registry"))
    var registry: String?

    @Option(help: ArgumentHelp("For setup: the user name to answer with instead of the account id (e.g. oauth2accesstoken).",
                               valueName: "name"))
    var username: String?

    @Option(help: ArgumentHelp("For setup: the Docker configuration to change (default: $DOCKER_CONFIG/config.json, else ~/.docker/config.json).",
                               valueName: "file"))
    var config: String?

    func validate() throws {
        guard ["get", "store", "erase", "list", "setup"].contains(action) else {
            throw ValidationError("the action is get, store, erase, list or setup")
        }
        if action == "setup" {
            guard registry != nil else { throw ValidationError("setup needs the registry, HOST[:PORT]") }
        } else {
            if registry != nil { throw ValidationError("\(action) takes no registry: the client writes it on standard input") }
            if username != nil || config != nil { throw ValidationError("--username and --config are for setup") }
        }
        if let config, config.isEmpty || config.hasSuffix("/") { throw ValidationError("--config takes the path of a file, not a folder") }
    }

    func run() async throws {
        if action == "setup" {
            try await setUp(registry!)
        } else {
            try await Self.answer(global.settings, action: action)
        }
    }

    private func setUp(_ text: String) async throws {
        guard let host = RegistryHost(text) else {
            throw AuthError.invalidInput("invalid registry '\(Output.escapingControlCharacters(text))': give HOST[:PORT], the host of ASCII letters, digits, '.', '-' and '_'")
        }
        guard let registry = ServedRegistry(host: host, username: username) else {
            throw AuthError.invalidInput("invalid user name '\(Output.escapingControlCharacters(username ?? ""))': 1 to 255 ASCII letters, digits, '.', '_', '-', '@', '+' and '~'")
        }
        let controller = try global.makeController()
        // Refused before the Docker configuration is touched.
        guard try controller.binding() != nil else {
            throw AuthError.invalidInput("\(controller.service) is not bound to a token server, so it has no token to give a registry; bind it with `authctl server set URL`")
        }
        if let other = try controller.service(servingRegistry: host), other != controller.service {
            throw AuthError.invalidInput("\(other) already serves the registry \(host); a registry gets the token of one service")
        }
        // The settings first: a registry listed there that no client asks about yet harms nothing,
        // while credHelpers naming authctl for a registry it does not serve would hide the
        // client's own login (credHelpers wins over auths). The Docker configuration failing
        // takes the registry out again.
        let file = config ?? Self.defaultConfiguration
        let existed = try controller.registries().contains { $0.host.isSameRegistry(as: host) }
        let added = try controller.addRegistry(registry)
        let helperSet: Bool
        do {
            helperSet = try DockerConfiguration.setCredentialHelper("authctl", for: host.rawValue, in: file)
        } catch {
            if !existed { _ = try? controller.removeRegistry(host) }
            throw error
        }
        try Output.line(added || helperSet ? "\(host) now gets the access token of \(controller.service) (credential helper set in \(file))."
                                           : "\(host) already gets the access token of \(controller.service).")
    }

    /// The file docker reads: `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`.
    static var defaultConfiguration: String {
        if let folder = ProcessEnvironment.value("DOCKER_CONFIG") { return folder + "/config.json" }
        return ProcessEnvironment.homeDirectory + "/.docker/config.json"
    }

    /// The protocol's words for a registry it has nothing for, which clients look for.
    static let notFound = "credentials not found in native keychain"

    /// The action a client asked for, with its request on standard input; also for ``FastPath``.
    static func answer(_ global: GlobalSettings, action: String) async throws {
        // `list` has no request; the others' is read whole first, so a client never blocks on a
        // full pipe.
        let request = action == "list" ? "" : try readRequest()
        guard action != "store" else { return }
        // Never the unlock prompt: a registry client may run with nobody at the screen.
        var settings = global
        settings.noPrompt = true
        let controller = try settings.makeController()
        switch action {
        case "list":
            try Output.json(RegistryUsers(entries: try controller.dockerCredentialUsers()))
        case "erase":
            guard try controller.expireDockerCredential(forRegistry: request) else { throw try notFoundExit() }
        default:
            let credential: AuthControllerCore.DockerCredential?
            do {
                credential = try await FirstSignal.deferred { () async throws(AuthError) in
                    try await controller.dockerCredential(forRegistry: request)
                }
            } catch AuthError.notSignedIn(let message) {
                Output.diagnostic(Output.words(message))
                throw try notFoundExit()
            }
            guard let credential else { throw try notFoundExit() }
            for warning in credential.warnings { Output.diagnostic(Output.words(warning)) }
            try Output.json(credential)
        }
    }

    /// Prints the not-found line and returns the exit that follows it.
    private static func notFoundExit() throws -> ExitCode {
        try Output.line(notFound)
        return ExitCode(ExitStatus.no)
    }

    /// Standard input as text. No more than 64 KiB is ever read: a request that fills them is
    /// refused without reading on (a registry's name is a few dozen bytes).
    private static func readRequest() throws -> String {
        let limit = 64 * 1024
        let bytes = try StandardInput.read(atMost: limit, failure: "cannot read the request on standard input")
        guard bytes.count < limit else { throw AuthError.invalidInput("the request on standard input is 64 KiB or more: it is not a registry") }
        guard let text = String(validating: bytes, as: UTF8.self), !text.contains("\0") else {
            throw AuthError.invalidInput("the request on standard input is not UTF-8 text: it is not a registry")
        }
        return text
    }
}

/// `list`'s answer: `{"REGISTRY":"USERNAME",…}`, in the order the library lists them.
private struct RegistryUsers: Encodable {
    let entries: [(registry: RegistryHost, username: String)]

    private struct Key: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        for entry in entries { try container.encode(entry.username, forKey: Key(stringValue: entry.registry.rawValue)) }
    }
}
