// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

/// The claims about a person that an OpenID provider made: an ID token's payload or a
/// userinfo answer, a JSON object. Only string and boolean claims are read.
struct Claims: Sendable, Equatable {
    private var values: [String: JSONValue]

    /// The claims of a JSON object; `nil` when `bytes` is not one.
    init?(json bytes: [UInt8]) {
        guard let values = TokenExchange.decode([String: JSONValue].self, bytes, using: JSONValue.claimsDecoder()) else { return nil }
        self.values = values
    }

    /// The claims in a JWT's payload, unverified: for a token verified before it was stored.
    init?(payloadOf token: String) {
        guard let payload = CompactJWS.unverifiedPayload(of: token) else { return nil }
        self.init(json: payload)
    }

    /// The claim `name` when its value is a JSON string, else `nil` (absent, a number, a boolean,
    /// an array, an object or null). Numbers are not turned into text: JSON spells one number many
    /// ways (`1042`, `1042.0`, `1.042e3`), and the value may become an account id, which must have
    /// one spelling.
    func string(_ name: String) -> String? {
        values[name]?.string
    }

    /// The claim `name` as it was sent, for readers with rules of their own (an ID token's).
    subscript(name: String) -> JSONValue? { values[name] }

    /// The claim `name` when it is a number, whichever way JSON spelt it.
    func number(_ name: String) -> Double? { values[name]?.number }

    /// Whether the claim `name` exists at all.
    func has(_ name: String) -> Bool { values[name] != nil }

    var subject: String? { string("sub") }

    /// `aud`, a string or an array of strings.
    var audiences: [String] {
        switch values["aud"] {
        case .string(let audience)?: [audience]
        case .array(let list)?:
            // A list with any other value in it is not one of audiences: none is read.
            list.allSatisfy { $0.string != nil } ? list.compactMap(\.string) : []
        default: []
        }
    }

    /// `email_verified`: a boolean, or the strings `"true"`/`"false"` (in any case) that some
    /// providers send.
    var emailVerified: Bool? {
        switch values["email_verified"] {
        case .bool(let flag)?: flag
        case .string(let text)? where text.lowercased() == "true": true
        case .string(let text)? where text.lowercased() == "false": false
        default: nil
        }
    }

    /// The e-mail address, unless the provider says it is not verified.
    var verifiedEmail: String? {
        emailVerified == false ? nil : string("email")
    }

    /// These claims, with those of `other` that these lack.
    func filling(from other: Claims) -> Claims {
        var merged = self
        merged.values.merge(other.values) { mine, _ in mine }
        return merged
    }
}
