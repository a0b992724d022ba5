// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

/// OpenID Connect ID tokens (OpenID Connect Core 1.0 §2, §3.1.3.7): a JWS in compact form
/// (RFC 7515 §7.1) whose payload says who signed in, for which client, and until when.
///
/// The signature is always checked, even over TLS, against the provider's key set; then the
/// claims. Every failure is ``AuthError/protocolError(_:)`` naming the check that failed, and
/// text from the provider is quoted as every provider answer is.
enum IDToken {
    /// How far ahead of the provider's clock an ID token's `iat` may be, in µs.
    static let issuedAtTolerance: UInt64 = 5 * 60 * 1_000_000

    /// The `kid` the token's header names, or `nil` when it names none or is not a JWS. When the
    /// key set lacks that key (``JSONWebKeySet/hasKey(id:)``), fetch the key set again once before
    /// verifying: the provider may have rotated its keys.
    static func keyID(of token: String) -> String? {
        try? DecodedJWS(token).header.kid
    }

    /// Checks an ID token from a token answer and returns its claims: the signature (algorithm
    /// on the allow-list, key chosen from `keys` by `kid`), then `iss` equal to `issuer` exactly,
    /// `aud` holding `clientID` (and with several audiences, `azp` equal to it), `exp` after
    /// `serverNow` and `iat` at most five minutes after it, and `nonce` equal to `nonce` when one
    /// was sent (pass `nil` when the request carried none, as a refresh does).
    ///
    /// `serverNow` is the provider's clock in µs since the epoch: local time plus the clock
    /// offset learnt from the token answer's `Date` header. Throws ``AuthError/protocolError(_:)``
    /// naming the failed check, or ``AuthError/unavailable(_:detail:)-enum.case`` when GnuTLS,
    /// which checks signatures, is not installed.
    static func verify(_ token: String, keys: JSONWebKeySet, issuer: String, clientID: String, nonce: String?,
                       serverNow: UInt64) throws(AuthError) -> IDTokenClaims {
        let jws = try DecodedJWS(token)
        let key = try keys.key(id: jws.header.kid, for: jws.algorithm)
        guard case .success(let material) = key.material,
              try SignatureVerification.isValid(jws.signature, of: jws.signingInput, algorithm: jws.algorithm, key: material,
                                                keyName: key.displayName) else {
            throw .protocolError("the ID token's signature does not verify with \(key.displayName)")
        }
        let claims = try IDTokenClaims(payload: jws.payload)
        guard claims.issuer == issuer else {
            throw .protocolError("the ID token was issued by '\(TokenExchange.quote(claims.issuer))', not by the provider '\(TokenExchange.quote(issuer))'")
        }
        guard claims.audiences.contains(clientID) else { throw .protocolError("the ID token was issued for another client") }
        if claims.audiences.count > 1, claims.authorizedParty != clientID {
            throw .protocolError("the ID token names several audiences, and its authorized party ('azp') is not this client")
        }
        guard claims.expiry > serverNow else { throw .protocolError("the ID token has expired") }
        guard claims.issuedAt <= serverNow + issuedAtTolerance else {
            throw .protocolError("the ID token was issued more than 5 minutes ahead of the provider's clock")
        }
        if let nonce {
            guard let sent = claims.nonce else { throw .protocolError("the ID token has no nonce, and the sign-in sent one") }
            guard sent == nonce else { throw .protocolError("the ID token's nonce does not match the sign-in") }
        }
        return claims
    }

    /// Checks the ID token of a refresh answer as ``verify(_:keys:issuer:clientID:nonce:serverNow:)``
    /// does without a nonce, and that its `iss`, `aud` and `sub` are those of `stored`, the one the
    /// sign-in verified (OpenID Connect Core 1.0 §12.2); the audiences are compared as sets.
    static func verifyRefreshed(_ token: String, stored: IDTokenClaims, keys: JSONWebKeySet, issuer: String, clientID: String,
                                serverNow: UInt64) throws(AuthError) -> IDTokenClaims {
        let claims = try verify(token, keys: keys, issuer: issuer, clientID: clientID, nonce: nil, serverNow: serverNow)
        guard claims.issuer == stored.issuer else { throw .protocolError("the refreshed ID token names another issuer than the signed-in one") }
        guard Set(claims.audiences) == Set(stored.audiences) else {
            throw .protocolError("the refreshed ID token names other audiences than the signed-in one")
        }
        guard claims.subject == stored.subject else { throw .protocolError("the refreshed ID token names another subject than the signed-in one") }
        return claims
    }

    /// The claims of an ID token that was verified when it was stored, read again without checking
    /// its signature or times (its key may have been rotated since, and it may have expired): the
    /// baseline for ``verifyRefreshed(_:stored:keys:issuer:clientID:serverNow:)``. Throws
    /// ``AuthError/protocolError(_:)`` when it is not a JWS whose payload has the required claims.
    static func storedClaims(of token: String) throws(AuthError) -> IDTokenClaims {
        try IDTokenClaims(payload: DecodedJWS(token).payload)
    }
}

/// An ID token's JWS, split and decoded strictly, its header checked, but not verified.
private struct DecodedJWS {
    struct Header: Decodable {
        var alg: String
        var kid: String?
        var crit: [String]?
    }

    let header: Header
    let algorithm: JWSAlgorithm
    /// The header and payload as they were sent, joined by `.`: what the signature covers.
    let signingInput: Substring
    let payload: [UInt8]
    let signature: [UInt8]

    init(_ token: String) throws(AuthError) {
        guard let jws = CompactJWS(token) else { throw .protocolError("the ID token is not a JWS in compact form (three parts joined by '.')") }
        for part in CompactJWS.Part.allCases where jws[part].utf8.count > CompactJWS.maximumPartLength {
            throw .protocolError("the ID token's \(part.rawValue) is longer than \(CompactJWS.maximumPartLength / 1024) KiB")
        }
        guard let headerBytes = jws.decoded(.header, .strict), let payload = jws.decoded(.payload, .strict),
              let signature = jws.decoded(.signature, .strict) else {
            throw .protocolError("the ID token is not a JWS in compact form (a part is not unpadded base64url)")
        }
        guard let header = try? JSONDecoder().decode(Header.self, from: Data(headerBytes)) else {
            throw .protocolError("the ID token's header is not a JSON object with an 'alg'")
        }
        guard let algorithm = JWSAlgorithm(rawValue: header.alg) else {
            let accepted = JWSAlgorithm.allCases.map(\.rawValue).joined(separator: ", ")
            let refusal: AuthError.Message = switch header.alg {
            case "none": "the ID token is not signed (its 'alg' is 'none')"
            case "HS256", "HS384", "HS512": "the ID token is signed with \(header.alg), a shared secret, not a key of the provider's"
            default: "the ID token is signed with '\(TokenExchange.quote(header.alg))', which authctl does not accept (only \(accepted))"
            }
            throw .protocolError(refusal)
        }
        // RFC 7515 §4.1.11: extensions named critical must be understood, and authctl knows none.
        if let critical = header.crit {
            throw .protocolError("the ID token's header requires extensions authctl does not know ('crit': \(TokenExchange.quote(critical.joined(separator: ", "))))")
        }
        guard !signature.isEmpty else { throw .protocolError("the ID token's signature is empty") }
        self.header = header
        self.algorithm = algorithm
        signingInput = jws.signingInput
        self.payload = payload
        self.signature = signature
    }
}

/// The claims of a verified ID token (OpenID Connect Core 1.0 §2): who signed in, at which
/// provider, for which clients, checked strictly; the profile claims (§5.1) are read as a
/// userinfo answer's are, through ``Claims``.
struct IDTokenClaims: Sendable, Equatable {
    /// `iss`: the provider that issued the token.
    let issuer: String
    /// `sub`: the provider's never-reassigned identifier of the person.
    let subject: String
    /// `aud`: the clients the token is for (a single string in the token is one audience).
    let audiences: [String]
    /// `azp`: the client the token was issued to, when the token names one.
    let authorizedParty: String?
    /// `exp`, in µs since the epoch by the provider's clock.
    let expiry: UInt64
    /// `iat`, in µs since the epoch by the provider's clock.
    let issuedAt: UInt64
    /// `nonce`, when the token carries one.
    let nonce: String?
    /// Every claim of the payload, for the profile (`email`, `name`, `preferred_username`…).
    let profile: Claims

    init(payload: [UInt8]) throws(AuthError) {
        guard let members = Claims(json: payload) else { throw .protocolError("the ID token's payload is not a JSON object") }
        profile = members
        func string(_ name: String) throws(AuthError) -> String? {
            switch members[name] {
            case nil: nil
            case .string(let value): value
            default: throw .protocolError("the ID token's '\(name)' is not a string")
            }
        }
        func required(_ name: String, _ meaning: String) throws(AuthError) -> String {
            guard let value = try string(name), !value.isEmpty else { throw .protocolError("the ID token has no \(meaning) ('\(name)')") }
            return value
        }
        func time(_ name: String, _ meaning: String) throws(AuthError) -> UInt64 {
            guard let seconds = members[name]?.number else { throw .protocolError("the ID token has no \(meaning) ('\(name)')") }
            guard seconds.isFinite, seconds >= 0, seconds < 1e13 else {
                throw .protocolError("the ID token's \(meaning) ('\(name)') is not a time")
            }
            return UInt64(seconds * 1_000_000)
        }
        issuer = try required("iss", "issuer")
        subject = try required("sub", "subject")
        switch members["aud"] {
        case .string(let audience): audiences = [audience]
        case .array(let list):
            audiences = list.compactMap(\.string)
            guard audiences.count == list.count else { throw .protocolError("the ID token's audiences ('aud') are not all strings") }
        default: throw .protocolError("the ID token has no audience ('aud')")
        }
        authorizedParty = try string("azp")
        expiry = try time("exp", "expiry")
        issuedAt = try time("iat", "issue time")
        nonce = try string("nonce")
    }
}
