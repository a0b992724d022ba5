// SPDX-License-Identifier: Apache-2.0
@_exported public import AuthControllerCore
public import Foundation

extension Notification.Name {
    /// Posted once per ``AuthControllerCore/LoginEvent``, after the change is stored, with the
    /// event in `userInfo` under ``AuthControllerCore/LoginEvent/userInfoKey`` and the controller
    /// as the notification's object.
    public static let loginStatusChanged = Notification.Name("io.github.authctl.loginStatusChanged")
}

extension LoginEvent {
    /// The `userInfo` key under which `Notification.Name.loginStatusChanged` carries the event.
    public static let userInfoKey = "event"
}

/// Posts each event on a `NotificationCenter`.
struct NotificationCenterObserver: LoginEventObserver {
    let center: NotificationCenter

    func observe(_ event: LoginEvent, from controller: AuthController) {
        center.post(name: .loginStatusChanged, object: controller, userInfo: [LoginEvent.userInfoKey: event])
    }
}

extension AuthController {
    /// A controller made of the given parts that posts each event on `notificationCenter`
    /// (`Notification.Name.loginStatusChanged`). Tests pass in-memory parts from
    /// `AuthControllerTesting`; an app on the desktop calls
    /// ``desktop(service:environment:prompting:keyringTimeout:serverTimeout:busAddress:notificationCenter:)``.
    ///
    /// - Parameters:
    ///   - service: the service whose accounts this controller signs in and out.
    ///   - keyring: where password hashes and tokens are kept.
    ///   - settings: where the signed-in account is recorded.
    ///   - hasher: how passwords are hashed and checked; Argon2id with the default parameters.
    ///   - broadcaster: who tells other processes of each event.
    ///   - notificationCenter: where each event is posted as `Notification.Name.loginStatusChanged`.
    ///   - tokenTransport: how to reach token servers; `nil` for a controller of local accounts only.
    ///   - serverTimeout: how long each request to a token server may take.
    ///   - clock: the time now; tests pass a clock they move by hand.
    public convenience init(service: ServiceName = .standard, keyring: any SecretStore, settings: any SettingsStore,
                            hasher: any PasswordHasher = Argon2idHasher(), broadcaster: any EventBroadcaster,
                            notificationCenter: NotificationCenter = .default, tokenTransport: (any HTTPTransport)? = nil,
                            serverTimeout: Duration = .seconds(10), clock: @escaping @Sendable () -> Date = { Date() }) {
        self.init(service: service, keyring: keyring, settings: settings, hasher: hasher, broadcaster: broadcaster,
                  observers: [NotificationCenterObserver(center: notificationCenter)], tokenTransport: tokenTransport,
                  serverTimeout: serverTimeout, clock: clock)
    }

    /// The controller of `service` on this desktop, in one call: password hashes and tokens in
    /// the Secret Service's default collection, the signed-in account in the settings file under
    /// the XDG config folder, every event posted on `notificationCenter` and sent as a D-Bus
    /// signal on the session bus, and token servers reached through libsoup.
    ///
    /// ```swift
    /// let auth = AuthController.desktop(service: "com.example.notes")
    /// ```
    ///
    /// - Parameters:
    ///   - service: the service whose accounts this controller signs in and out.
    ///   - environment: where the settings are and whether the unlock prompt can be shown;
    ///     by default this process's.
    ///   - prompting: whether calls that may unlock the keyring may show its prompt.
    ///   - keyringTimeout: the deadline of each Secret Service call; `nil` gives a minute to a
    ///     call that may prompt and 5 seconds to any other.
    ///   - serverTimeout: the deadline of each request to a token server.
    ///   - busAddress: the D-Bus address to use; `nil` for the session bus.
    ///   - notificationCenter: where each event is posted as `Notification.Name.loginStatusChanged`.
    public static func desktop(service: ServiceName = .standard, environment: DesktopEnvironment = .current,
                               prompting: Bool = true, keyringTimeout: Duration? = nil,
                               serverTimeout: Duration = .seconds(10), busAddress: String? = nil,
                               notificationCenter: NotificationCenter = .default) -> AuthController {
        desktop(service: service, environment: environment, prompting: prompting, keyringTimeout: keyringTimeout,
                serverTimeout: serverTimeout, busAddress: busAddress,
                observers: [NotificationCenterObserver(center: notificationCenter)])
    }
}
