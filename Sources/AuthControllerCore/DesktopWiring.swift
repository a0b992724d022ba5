// SPDX-License-Identifier: Apache-2.0
/// What the desktop wiring of a controller takes from the process's environment: where the
/// settings file is, and whether a graphical session could show the keyring's unlock prompt.
///
/// ``current`` reads it (XDG Base Directory rules); a test or an unusual set-up makes its own.
public struct DesktopEnvironment: Sendable, Equatable {
    /// The folder of `settings.ini` and `settings.lock`.
    public var settingsDirectory: String
    /// Whether the Secret Service's unlock prompt has somewhere to appear.
    public var canShowPrompts: Bool
    /// Where libsecret keeps items: the Secret Service, or its file keyring.
    public var keyringBackend: SecretServiceStore.Backend
    /// The proxies requests to servers go through (the desktop's own setting when none is set).
    public var proxies: ProxyVariables

    /// An environment of your own: the settings file in `settingsDirectory`, whether the unlock
    /// prompt can be shown, where libsecret keeps items, and the proxy variables (by default this
    /// process's).
    public init(settingsDirectory: String, canShowPrompts: Bool, keyringBackend: SecretServiceStore.Backend = .secretService,
                proxies: ProxyVariables = .current) {
        self.settingsDirectory = settingsDirectory
        self.canShowPrompts = canShowPrompts
        self.keyringBackend = keyringBackend
        self.proxies = proxies
    }

    /// This process's: `$XDG_CONFIG_HOME/authctl`, with `$HOME/.config` (else the passwd entry's
    /// home) when `XDG_CONFIG_HOME` is unset, empty or relative; prompts when `DISPLAY` or
    /// `WAYLAND_DISPLAY` is set; libsecret's file keyring when `SECRET_BACKEND` is `file`, as
    /// libsecret itself decides.
    public static var current: DesktopEnvironment {
        let configHome = ProcessEnvironment.value("XDG_CONFIG_HOME").flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? ProcessEnvironment.homeDirectory + "/.config"
        return DesktopEnvironment(
            settingsDirectory: configHome + "/authctl",
            canShowPrompts: ProcessEnvironment.value("DISPLAY") != nil || ProcessEnvironment.value("WAYLAND_DISPLAY") != nil,
            keyringBackend: ProcessEnvironment.value("SECRET_BACKEND") == "file" ? .fileKeyring : .secretService)
    }
}

extension AuthController {
    /// The controller of `service` on this desktop: the default collection of the session bus's
    /// Secret Service (or libsecret's file keyring, as `environment` says), the settings file of
    /// `environment`, `LoginStatusChanged` signals on the session bus, and libsoup (loaded on the
    /// first request) for token servers, through the proxies `environment` names.
    ///
    /// An app that imports `AuthController` calls the variant that posts on a
    /// `NotificationCenter` instead; this one hands events to `observers` only.
    ///
    /// - Parameters:
    ///   - service: the service whose accounts this controller signs in and out.
    ///   - environment: where the settings file is and whether the unlock prompt can be shown;
    ///     by default this process's.
    ///   - prompting: whether calls that may unlock the keyring may show its prompt (when
    ///     `environment` can show one); `false` makes a locked keyring fail at once.
    ///   - keyringTimeout: the deadline of each Secret Service call; `nil` gives a minute to a
    ///     call that may prompt and 5 seconds to any other.
    ///   - serverTimeout: the deadline of each request to a token server.
    ///   - busAddress: the D-Bus address the signals go to (`unix:path=…`); `nil` for the session
    ///     bus. The keyring is always the session bus's Secret Service, as libsecret finds it.
    ///   - observers: who hears each event in this process, after it is stored and broadcast.
    public static func desktop(service: ServiceName = .standard, environment: DesktopEnvironment = .current,
                               prompting: Bool = true, keyringTimeout: Duration? = nil,
                               serverTimeout: Duration = .seconds(10), busAddress: String? = nil,
                               observers: [any LoginEventObserver]) -> AuthController {
        AuthController(
            service: service,
            keyring: SecretServiceStore(promptAllowed: prompting && environment.canShowPrompts,
                                        promptTimeout: keyringTimeout ?? .seconds(60), callTimeout: keyringTimeout ?? .seconds(5),
                                        backend: environment.keyringBackend),
            settings: KeyFileSettingsStore(directory: environment.settingsDirectory),
            broadcaster: DBusBroadcaster(busAddress: busAddress),
            observers: observers,
            tokenTransport: SoupTransport(proxies: environment.proxies),
            serverTimeout: serverTimeout)
    }
}

extension Duration {
    /// The duration in seconds, as the GLib deadlines take it.
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    /// The whole seconds of a span, none when it is negative: for the thresholds and lifetimes
    /// that servers and the settings count in seconds.
    package var wholeSeconds: UInt64 { UInt64(clamping: max(0, components.seconds)) }
}
