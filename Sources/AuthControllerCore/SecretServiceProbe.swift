// SPDX-License-Identifier: Apache-2.0
/// What answers on a bus, for a program that waits for a Secret Service to come up (such as a
/// sandbox that has just started its bus and keyring daemons). Each check is one short round trip over a
/// private connection of its own, never the process's shared session bus.
package enum SecretServiceProbe {
    /// How far along a bus is.
    package enum State: Sendable, Equatable {
        /// Nothing accepts a D-Bus connection at the address (yet).
        case noBus
        /// A bus answers, but nobody owns `org.freedesktop.secrets` on it.
        case noSecretService
        /// The Secret Service answers, but its `default` alias resolves to no collection.
        case noDefaultCollection
        /// The Secret Service answers and its `default` alias names a collection.
        case ready
    }

    /// Connects to the bus at `address` and asks whether `org.freedesktop.secrets` has an owner
    /// and whether its `default` alias resolves. Blocks for at most about `timeout` seconds per
    /// step; never starts a service (no auto-start) and never prompts.
    /// The corresponding D-Bus members are `org.freedesktop.DBus.NameHasOwner` and
    /// `org.freedesktop.Secret.Service.ReadAlias`.
    package static func state(ofBusAt address: String, timeout: Double = 1) -> State {
        guard let connection = try? GDBus.connectionNewForAddress(address, Deadline(seconds: timeout)) else { return .noBus }
        let owned = try? GDBus.connectionCall(connection, destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                                              interface: "org.freedesktop.DBus", method: "NameHasOwner",
                                              strings: ["org.freedesktop.secrets"], Deadline(seconds: timeout))
        guard owned == "true" else { return .noSecretService }
        let alias = try? GDBus.connectionCall(connection, destination: "org.freedesktop.secrets", path: "/org/freedesktop/secrets",
                                              interface: "org.freedesktop.Secret.Service", method: "ReadAlias",
                                              strings: ["default"], Deadline(seconds: timeout))
        guard let alias, alias != "/" else { return .noDefaultCollection }
        return .ready
    }
}
