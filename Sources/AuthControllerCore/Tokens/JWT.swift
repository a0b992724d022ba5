// SPDX-License-Identifier: Apache-2.0
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
        guard let seconds = Claims(payloadOf: token)?.number(claim),
              seconds.isFinite, seconds > 0, seconds < 1e13 else { return nil }
        return UInt64(seconds * 1_000_000)
    }
}
