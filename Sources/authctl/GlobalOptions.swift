import ArgumentParser
import AuthController

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

    /// The service from `--service`, else `AUTHCTL_SERVICE` (empty counts as unset), else the default.
    func resolvedService() throws(AuthError) -> ServiceName {
        if let service { return try ServiceName(validating: service) }
        if let fromEnvironment = ProcessEnvironment.value("AUTHCTL_SERVICE") { return try ServiceName(validating: fromEnvironment) }
        return .standard
    }

    /// The settings directory by the XDG Base Directory rules: `$XDG_CONFIG_HOME/authctl`, with
    /// `$HOME/.config` when it is unset, empty or relative.
    static func settingsDirectory() -> String {
        if let configured = ProcessEnvironment.value("XDG_CONFIG_HOME"), configured.hasPrefix("/") {
            return configured + "/authctl"
        }
        return homeDirectory() + "/.config/authctl"
    }

    private static func homeDirectory() -> String {
        ProcessEnvironment.value("HOME") ?? ProcessEnvironment.currentUser?.homeDirectory ?? "/"
    }

    /// The unlock prompt needs somewhere to appear.
    var promptAllowed: Bool {
        !noPrompt && (ProcessEnvironment.value("DISPLAY") != nil || ProcessEnvironment.value("WAYLAND_DISPLAY") != nil)
    }

    /// The controller for the real Secret Service, settings file and session bus.
    func makeController() throws(AuthError) -> AuthController {
        makeController(service: try resolvedService())
    }

    /// The controller of `service`, on the bus at `busAddress` (`nil`: the session bus);
    /// `prompting: false` never shows the keyring's unlock prompt, whatever the options say.
    func makeController(service: ServiceName, busAddress: String? = nil, prompting: Bool = true) -> AuthController {
        AuthController(
            service: service,
            keyring: SecretServiceStore(promptAllowed: prompting && promptAllowed, promptTimeout: keyringTimeout ?? 60,
                                        callTimeout: keyringTimeout ?? 5, busAddress: busAddress),
            settings: KeyFileSettingsStore(directory: Self.settingsDirectory()),
            broadcaster: DBusBroadcaster(busAddress: busAddress),
            tokenTransport: SoupTransport(),
            serverTimeout: serverTimeout ?? 10
        )
    }
}
