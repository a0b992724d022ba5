// SPDX-License-Identifier: Apache-2.0
/// The secret part of a signed-in account of a bound service, kept as one keyring item
/// (never in a file): a JSON object with `accessToken`, `refreshToken` (may be absent) and
/// `tokenType`, and from an OpenID provider `idToken` and `subject`.
package struct TokenSet: Codable, Equatable, Sendable {
    /// The access token: the credential an app presents to the services behind the token server.
    package var accessToken: String
    /// The token that gets a new access token; `nil` when the server gave none, and the access
    /// token then cannot be renewed.
    package var refreshToken: String?
    /// The access token's type: `Bearer`, the only type authctl accepts from a server.
    package var tokenType: String
    /// The ID token an OpenID provider issued with them, verified before it was stored; `nil`
    /// from other servers, and when the provider issued none.
    package var idToken: String?
    /// The account's `sub` claim at its OpenID provider, which a refresh's ID token must repeat.
    package var subject: String?

    /// The tokens as a server gave them.
    package init(accessToken: String, refreshToken: String? = nil, tokenType: String = "Bearer", idToken: String? = nil,
                subject: String? = nil) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.tokenType = tokenType
        self.idToken = idToken
        self.subject = subject
    }
}

/// What a token server answered to a password or refresh grant: the tokens and what it said
/// of their lifetimes, before they are turned into local times (the server's clock, learnt
/// from its `Date` header, may be hours ahead or behind).
package struct TokenGrant: Equatable, Sendable {
    /// When an expiry is counted from.
    package enum Expiry: Equatable, Sendable {
        /// Seconds from when the answer arrived (`expires_in`).
        case after(seconds: UInt64)
        /// An instant by the server's clock, in µs since the epoch (`accessTokenExpire`, a JWT `exp`).
        case at(serverMicroseconds: UInt64)
    }

    /// The tokens the server gave.
    package var tokens: TokenSet
    /// When the access token expires, as the server said it; `nil` when it did not.
    package var accessExpiry: Expiry?
    /// When the refresh token expires, as the server said it; `nil` when it did not.
    package var refreshExpiry: Expiry?
    /// The server's `Date` header, taken as the middle of its second, in µs; `nil` without one.
    package var serverDate: UInt64?
    /// When the answer arrived, by the local clock, in µs.
    package var arrivedAt: UInt64

    /// An answer with every field given, as a token client parses it.
    package init(tokens: TokenSet, accessExpiry: Expiry? = nil, refreshExpiry: Expiry? = nil, serverDate: UInt64? = nil,
                arrivedAt: UInt64) {
        self.tokens = tokens
        self.accessExpiry = accessExpiry
        self.refreshExpiry = refreshExpiry
        self.serverDate = serverDate
        self.arrivedAt = arrivedAt
    }

    /// The server's clock minus the local one, in µs (0 without a `Date` header).
    package var clockOffset: Int64 {
        guard let serverDate else { return 0 }
        return Int64(clamping: serverDate) - Int64(clamping: arrivedAt)
    }

    /// The lifetimes as local times, and whether there is a refresh token to renew the access
    /// token with. Absolute expiries are by the server's clock, however far off it is: counted
    /// from its own `Date`, they are the lifetimes it granted. An access token without a given
    /// expiry falls back to the `exp` of its JWT payload, if it is one; a refresh token without
    /// one keeps `previous`'s expiry when it is the same token (not rotated), else its expiry is
    /// unknown.
    package func times(previous: (tokens: TokenSet, times: TokenTimes)? = nil) -> TokenTimes {
        let span = TokenTimes.maximumSpan * 1_000_000
        // An offset beyond the maximum span is not kept (the settings file refuses it), but it
        // still turns the server's expiries into local times: ignored, it made a server whose
        // clock is years behind issue sessions that were over at once (and years ahead, tokens
        // that were never refreshed).
        let keptOffset = clockOffset.magnitude <= span ? clockOffset : 0
        func local(_ expiry: Expiry?) -> UInt64? {
            let time: UInt64?
            switch expiry {
            case .after(let seconds)?: time = arrivedAt.addingClamped(seconds.multipliedClamped(by: 1_000_000))
            case .at(let server)?: time = server.subtractingClamped(clockOffset)
            case nil: time = nil
            }
            return time.map { min($0, arrivedAt.addingClamped(span)) }
        }
        let accessExpiresAt = local(accessExpiry ?? JWT.expiry(of: tokens.accessToken).map { .at(serverMicroseconds: $0) })
        var refreshExpiresAt = local(refreshExpiry)
        if refreshExpiry == nil, let previous, previous.tokens.refreshToken == tokens.refreshToken {
            refreshExpiresAt = previous.times.refreshExpiresAt
        }
        let lifetime = accessExpiresAt.map { $0 > arrivedAt ? ($0 - arrivedAt) / 1_000_000 : 0 }
        // Whole seconds, as the settings keep it: `Date` has one-second resolution anyway.
        return TokenTimes(accessExpiresAt: accessExpiresAt, refreshExpiresAt: refreshExpiresAt,
                          clockOffset: Int64((Double(keptOffset) / 1_000_000).rounded()), accessLifetime: lifetime,
                          renewable: tokens.refreshToken != nil)
    }
}

extension UInt64 {
    /// Saturating arithmetic for times a server chose: a hostile answer can make a time far
    /// away, never a trap.
    func addingClamped(_ other: UInt64) -> UInt64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? .max : sum
    }

    func multipliedClamped(by other: UInt64) -> UInt64 {
        let (product, overflow) = multipliedReportingOverflow(by: other)
        return overflow ? .max : product
    }

    func subtractingClamped(_ offset: Int64) -> UInt64 {
        if offset >= 0 { return self > UInt64(offset) ? self - UInt64(offset) : 0 }
        return addingClamped(offset.magnitude)
    }
}
