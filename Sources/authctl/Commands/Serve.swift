// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthControllerCore

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve the login state on the session bus as io.github.authctl (D-Bus activated).",
        discussion: """
            Exports io.github.authctl.AuthController1 (GetStatus, ListAccounts, GetToken, SignOut) at \
            /io/github/authctl/AuthController1, with an io.github.authctl.Session1 object per service \
            whose properties follow every change, and an ObjectManager listing them. Refreshes the \
            tokens of signed-in services bound to a token server before they expire, and ends a \
            session when its refresh token expires or its keyring item is removed. It never shows \
            the keyring's unlock prompt (nobody asked for it): while the keyring is locked, calls \
            that need a secret fail with io.github.authctl.Error.Unavailable. No other command needs it.
            When a session ends without the person asking (the server ended it, or its keyring item \
            was removed), it posts a desktop notification "Signed out of SERVICE" that stays until \
            dismissed or a later sign-in; for an OpenID provider its action "Sign in again" starts \
            `authctl --service SERVICE sign-in ACCOUNT --flow browser`. A LoginStatusChanged signal \
            alone never posts one: the settings must show the session ended. --no-notifications \
            posts none.
            On SIGINT/SIGTERM it releases the name, answers calls still waiting for the keyring with \
            io.github.authctl.Error.Unavailable, and lets a sign-out or token refresh under way finish; \
            it sends no new refresh request, and stores what a refresh already sent gets back.
            Exit status: 0 on SIGINT/SIGTERM, when another serve --replace takes the name over, or \
            after --idle-exit; 69 when the name is taken or the session bus goes away.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Flag(help: "Take the name over from a running `authctl serve`, which then exits 0.")
    var replace = false

    @Option(help: ArgumentHelp("Exit after this many seconds with no call, no caller still connected and no token to refresh.",
                               valueName: "seconds"))
    var idleExit: Double?

    @Flag(name: .customLong("no-notifications"), help: "Never post a desktop notification when a session ends.")
    var noNotifications = false

    func validate() throws {
        if global.service != nil {
            throw ValidationError("serve serves every service at once; --service does not apply (each method takes the service)")
        }
        if let idleExit, !(idleExit > 0 && idleExit <= 315_360_000) {
            throw ValidationError("--idle-exit takes a number of seconds greater than 0 and at most 315360000 (ten years)")
        }
    }

    func run() async throws {
        // Started by D-Bus activation, serve the bus that started it (GIO's "starter" bus).
        let busAddress = ProcessEnvironment.value("DBUS_STARTER_BUS_TYPE") == "session"
            ? ProcessEnvironment.value("DBUS_STARTER_ADDRESS") : nil
        let settings = KeyFileSettingsStore(directory: DesktopEnvironment.current.settingsDirectory)
        let global = self.global
        let loginService = LoginService(settings: settings, settingsFile: settings.filePath, busAddress: busAddress,
                                        replace: replace, idleExit: idleExit, notifications: !noNotifications,
                                        warnings: { Output.diagnostic(Output.words($0)) }) { service in
            global.makeController(service: service, busAddress: busAddress, prompting: false)
        }
        _ = try await loginService.run(signals: ProcessSignal.deliveries(of: [.interrupt, .terminate]))
    }
}
