// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthControllerCore

/// Options every command takes, before or after its name.
struct GlobalOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The service whose accounts to act on (default: $AUTHCTL_SERVICE, else io.github.authctl).", valueName: "name"))
    var service: String?

    @Flag(name: .long, help: "Never show the keyring's unlock prompt: a locked keyring fails at once (exit 69).")
    var noPrompt = false

    @Option(name: .long, help: ArgumentHelp("Deadline for each Secret Service call (default: 60 for a call that may prompt, otherwise 5).", valueName: "seconds"))
    var keyringTimeout: Double?

    @Option(name: .long, help: ArgumentHelp("Deadline for each request to a token server (default: 10).", valueName: "seconds"))
    var serverTimeout: Double?

    func validate() throws {
        if let keyringTimeout, !(keyringTimeout > 0 && keyringTimeout <= 86_400) {
            throw ValidationError("--keyring-timeout takes a number of seconds greater than 0 and at most 86400")
        }
        if let serverTimeout, !(serverTimeout > 0 && serverTimeout <= 86_400) {
            throw ValidationError("--server-timeout takes a number of seconds greater than 0 and at most 86400")
        }
    }

    /// The options' values, for code that runs without swift-argument-parser (``FastPath``).
    var settings: GlobalSettings {
        GlobalSettings(service: service, noPrompt: noPrompt, keyringTimeout: keyringTimeout, serverTimeout: serverTimeout)
    }

    /// The service from `--service`, else `AUTHCTL_SERVICE` (empty counts as unset), else the default.
    func resolvedService() throws(AuthError) -> ServiceName {
        try settings.resolvedService()
    }

    /// The controller for the real Secret Service, settings file and session bus.
    func makeController() throws(AuthError) -> AuthController {
        try settings.makeController()
    }

    /// The controller of `service`, on the bus at `busAddress` (`nil`: the session bus);
    /// `prompting: false` never shows the keyring's unlock prompt, whatever the options say.
    func makeController(service: ServiceName, busAddress: String? = nil, prompting: Bool = true) -> AuthController {
        settings.makeController(service: service, busAddress: busAddress, prompting: prompting)
    }
}

/// The values of the options every command takes.
struct GlobalSettings {
    var service: String?
    var noPrompt = false
    var keyringTimeout: Double?
    var serverTimeout: Double?

    /// The service from `--service`, else `AUTHCTL_SERVICE` (empty counts as unset), else the default.
    func resolvedService() throws(AuthError) -> ServiceName {
        if let service { return try ServiceName(validating: service) }
        if let fromEnvironment = ProcessEnvironment.value("AUTHCTL_SERVICE") { return try ServiceName(validating: fromEnvironment) }
        return .standard
    }

    /// The controller for the real Secret Service, settings file and session bus.
    func makeController() throws(AuthError) -> AuthController {
        makeController(service: try resolvedService())
    }

    /// The controller of `service`, on the bus at `busAddress` (`nil`: the session bus);
    /// `prompting: false` never shows the keyring's unlock prompt, whatever the options say.
    func makeController(service: ServiceName, busAddress: String? = nil, prompting: Bool = true) -> AuthController {
        .desktop(service: service, prompting: prompting && !noPrompt, keyringTimeout: keyringTimeout.map { .seconds($0) },
                 serverTimeout: .seconds(serverTimeout ?? 10), busAddress: busAddress, observers: [])
    }
}
