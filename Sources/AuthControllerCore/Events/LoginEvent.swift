// SPDX-License-Identifier: Apache-2.0
public import FoundationEssentials

/// One change of login status for one service.
public struct LoginEvent: Equatable, Sendable {
    /// `signed-in` or `signed-out`, as carried by the D-Bus signal.
    public enum Status: String, Sendable {
        /// Someone is signed in after the change.
        case signedIn = "signed-in"
        /// Nobody is signed in after the change.
        case signedOut = "signed-out"
    }

    /// Why the status changed.
    public enum Reason: String, Sendable {
        /// An account signed in while nobody was signed in.
        case signIn = "sign-in"
        /// The signed-in account signed out.
        case signOut = "sign-out"
        /// Another account signed in in place of the signed-in one: the `signed-out` event of the old
        /// account and the `signed-in` event of the new one both carry it.
        case `switch` = "switch"
        /// The signed-in account was forgotten, which signed it out and cleared its keyring item.
        case forget = "forget"
        /// The token server ended the session (its refresh token expired or was refused).
        case expired = "expired"
        /// The signed-in account's keyring item was removed by another program.
        case removed = "removed"
        /// The current state, reported by a listener when it starts (never broadcast).
        case initial = "initial"
    }

    /// The service whose login status changed.
    public var service: ServiceName
    /// The status after the change.
    public var status: Status
    /// The account that signed in or out; `nil` only for an `initial` event with nobody signed in.
    public var account: AccountID?
    /// Why the status changed.
    public var reason: Reason
    /// The display name (may be empty).
    public var name: String
    /// When the change happened (the D-Bus signal carries it as microseconds since the Unix
    /// epoch).
    public var timestamp: Date
    /// The settings `sequence` value of this event.
    public var sequence: UInt64
    /// The account signed out by a switch, on the `signed-in` event of that switch.
    public var previousAccount: AccountID?

    /// An event with every field given.
    public init(service: ServiceName, status: Status, account: AccountID?, reason: Reason, name: String,
                timestamp: Date, sequence: UInt64, previousAccount: AccountID? = nil) {
        self.service = service
        self.status = status
        self.account = account
        self.reason = reason
        self.name = name
        self.timestamp = timestamp
        self.sequence = sequence
        self.previousAccount = previousAccount
    }

    /// Whether the event leaves someone signed in.
    public var isSignedIn: Bool { status == .signedIn }
}
