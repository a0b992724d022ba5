import FoundationEssentials

/// Just enough of JSON Web Tokens (RFC 7519) to schedule refreshes: the numeric `exp` claim
/// of the payload. The signature is not checked — the expiry only decides when to ask the
/// server again, and the server is the one that checks tokens.
enum JWT {
    /// The `exp` claim in µs since the epoch (by the server's clock), or `nil` when `token` is
    /// not a JWT with a numeric `exp`.
    static func expiry(of token: String) -> UInt64? {
        time("exp", of: token)
    }

    /// The `iat` claim likewise.
    static func issuedAt(of token: String) -> UInt64? {
        time("iat", of: token)
    }

    private static func time(_ claim: String, of token: String) -> UInt64? {
        // One claim a decode: a claim of the wrong type must not hide the other.
        struct Expiry: Decodable { var exp: Double? }
        struct IssuedAt: Decodable { var iat: Double? }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[1].utf8.count <= 16 * 1024, let payload = base64URLDecoded(parts[1]),
              let seconds = claim == "exp" ? (try? JSONDecoder().decode(Expiry.self, from: payload))?.exp
                                           : (try? JSONDecoder().decode(IssuedAt.self, from: payload))?.iat,
              seconds.isFinite, seconds > 0, seconds < 1e13 else { return nil }
        return UInt64(seconds * 1_000_000)
    }

    static func base64URLDecoded(_ text: Substring) -> Data? {
        var base64 = String(text.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
        base64 += String(repeating: "=", count: (4 - base64.utf8.count % 4) % 4)
        return Data(base64Encoded: base64)
    }
}
