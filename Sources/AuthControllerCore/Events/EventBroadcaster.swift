// SPDX-License-Identifier: Apache-2.0
/// Announces login events to other processes.
public protocol EventBroadcaster: Sendable {
    /// Sends `events` in order and returns once they have left this process (and, on D-Bus,
    /// reached the bus): a short-lived process may exit right after.
    func broadcast(_ events: [LoginEvent]) throws(AuthError)
}
