import FoundationEssentials

/// The claims about a person that an OpenID provider made: an ID token's payload or a
/// userinfo answer, a JSON object. Only string and boolean claims are read.
struct Claims: Sendable {
    /// One claim's value, as far as authctl reads it.
    enum Value: Decodable, Sendable {
        case string(String)
        case bool(Bool)
        case number(Double)
        case strings([String])
        case other

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let text = try? container.decode(String.self) {
                self = .string(text)
            } else if let flag = try? container.decode(Bool.self) {
                self = .bool(flag)
            } else if let number = try? container.decode(Double.self) {
                self = .number(number)
            } else if let texts = try? container.decode([String].self) {
                self = .strings(texts)
            } else {
                // Objects, mixed arrays and null are skipped over, not refused.
                _ = try? container.decode([String: Value].self)
                self = .other
            }
        }
    }

    private var values: [String: Value]

    /// The claims of a JSON object; `nil` when `bytes` is not one.
    init?(json bytes: [UInt8]) {
        guard let values = TokenExchange.decode([String: Value].self, bytes) else { return nil }
        self.values = values
    }

    /// The claims in a JWT's payload, unverified: for a token verified before it was stored.
    init?(payloadOf token: String) {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[1].utf8.count <= 16 * 1024, let payload = JWT.base64URLDecoded(parts[1]) else { return nil }
        self.init(json: Array(payload))
    }

    /// The claim `name` when it is a string.
    func string(_ name: String) -> String? {
        if case .string(let text)? = values[name] { return text }
        return nil
    }

    /// Whether the claim `name` exists at all.
    func has(_ name: String) -> Bool { values[name] != nil }

    var subject: String? { string("sub") }

    /// `aud`, a string or an array of strings.
    var audiences: [String] {
        switch values["aud"] {
        case .string(let audience)?: [audience]
        case .strings(let audiences)?: audiences
        default: []
        }
    }

    /// `email_verified`: a boolean, or the strings `"true"`/`"false"` some providers send.
    var emailVerified: Bool? {
        switch values["email_verified"] {
        case .bool(let flag)?: flag
        case .string("true")?: true
        case .string("false")?: false
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
