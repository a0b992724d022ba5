// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

/// The fields of a status document, in order: what `status --json` prints and what `serve`'s
/// `GetStatus` answers. Each front end renders the values its own way (times as RFC 3339 text
/// in JSON and as µs on D-Bus; absent values as `null` in JSON and left out on D-Bus), so the
/// two cannot disagree on which fields there are.
package struct StatusField: Sendable, Equatable {
    /// A field's value.
    package enum Value: Sendable, Equatable {
        /// Text.
        case text(String)
        /// A flag.
        case flag(Bool)
        /// A count.
        case number(UInt64)
        /// A moment: as RFC 3339 text, and in µs since the epoch.
        case time(rfc3339: String, microseconds: UInt64)
        /// Unknown, or not applicable (nobody signed in).
        case absent
    }

    /// The field's name (`signedIn`, `accessTokenExpiresAt`, …).
    package var name: String
    /// Its value.
    package var value: Value

    /// A field named `name` with `value`.
    package init(_ name: String, _ value: Value) {
        self.name = name
        self.value = value
    }
}

extension LoginStatus {
    /// The status document's fields, in the order the documents list them. `name` is empty
    /// rather than unknown while someone is signed in, and absent when nobody is.
    package var documentFields: [StatusField] {
        func text(_ value: String?) -> StatusField.Value { value.map { .text($0) } ?? .absent }
        func time(_ value: Date?) -> StatusField.Value {
            value.map { .time(rfc3339: Timestamp.rfc3339($0), microseconds: Timestamp.microseconds($0)) } ?? .absent
        }
        return [
            StatusField("service", .text(service.rawValue)),
            StatusField("signedIn", .flag(isSignedIn)),
            StatusField("user", text(account?.rawValue)),
            StatusField("name", text(isSignedIn ? name ?? "" : nil)),
            StatusField("signedInAt", time(signedInAt)),
            StatusField("sequence", .number(sequence)),
            StatusField("keyringLocked", .flag(keyringLocked)),
            StatusField("avatarURL", text(avatarURL)),
            StatusField("server", text(server?.rawValue)),
            StatusField("accessTokenExpiresAt", time(accessTokenExpiresAt)),
            StatusField("refreshTokenExpiresAt", time(refreshTokenExpiresAt)),
        ]
    }
}
