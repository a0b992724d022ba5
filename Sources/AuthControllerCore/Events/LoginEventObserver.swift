// SPDX-License-Identifier: Apache-2.0
/// Hears a controller's events in the process that made them.
///
/// An app that imports `AuthController` gets one for Foundation's `NotificationCenter`
/// (`Notification.Name.loginStatusChanged`); ``AuthController/events()`` offers the same events
/// as an `AsyncStream`.
public protocol LoginEventObserver: Sendable {
    /// Called once per event, in order, after the change is stored and broadcast and the
    /// settings lock is released (so the observer may call the controller), on the thread that
    /// made the change.
    func observe(_ event: LoginEvent, from controller: AuthController)
}
