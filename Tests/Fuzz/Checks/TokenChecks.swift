// SPDX-License-Identifier: Apache-2.0
@testable import AuthControllerCore
import FoundationEssentials

/// Tokens from a server: an ID token checked against the provider's keys, a JWT whose expiry
/// schedules refreshes, and the key set itself.
enum TokenChecks {
    /// The ID-token fixtures (Tests/Fixtures/IDTokens): key sets, and tokens signed with their keys.
    private struct Fixtures: Decodable {
        var issuer: String
        var clientID: String
        var nonce: String
        var keySets: [String: String]
        var tokens: [String: String]
    }

    private static let fixtures: (keySets: [JSONWebKeySet], issuer: String, clientID: String, nonce: String, signed: Set<Substring>) = {
        let path = FuzzTarget.fixturesFolder + "/IDTokens/id-tokens.json"
        guard let bytes = try? Posix.readAll(path: path), let fixtures = try? JSONDecoder().decode(Fixtures.self, from: Data(bytes)) else {
            fatalError("TokenChecks: cannot read \(path)")
        }
        let keySets = fixtures.keySets.keys.sorted().compactMap { try? JSONWebKeySet(json: Array(fixtures.keySets[$0]!.utf8)) }
        let signed = Set(fixtures.tokens.values.compactMap { CompactJWS($0)?.signingInput })
        return (keySets, fixtures.issuer, fixtures.clientID, fixtures.nonce, signed)
    }()

    /// A compact JWS: split, decoded, its claims read the ways authctl reads them, and verified
    /// against the fixtures' keys. No verified token may carry other claims than one the keys signed.
    @Sendable static func compactJWS(_ input: [UInt8]) throws(PropertyViolation) {
        let token = String(decoding: input, as: UTF8.self)
        if let jws = CompactJWS(token) {
            try require(jws[.header] + "." + jws[.payload] + "." + jws[.signature] == token, "the parts do not make up the token")
            try require(jws.signingInput == jws[.header] + "." + jws[.payload], "the signing input is not header.payload")
            for part in CompactJWS.Part.allCases {
                // Strict base64url has one spelling per text: the bytes spell the text again.
                if let bytes = jws.decoded(part, .strict) {
                    try require(Base64URL.encode(bytes) == jws[part], "the \(part) decodes strictly but has another spelling")
                }
                _ = jws.decoded(part, .lenient)
            }
        }
        let claims = Claims(payloadOf: token)
        for (name, time) in [("exp", JWT.expiry(of: token)), ("iat", JWT.issuedAt(of: token))] {
            guard let time else { continue }
            let seconds = claims?.number(name)
            try require(seconds.map { UInt64($0 * 1_000_000) == time } ?? false, "the JWT's \(name) is not its claim")
        }
        if let claims {
            _ = (claims.subject, claims.audiences, claims.verifiedEmail)
        }
        _ = IDToken.keyID(of: token)
        if let stored = try? IDToken.storedClaims(of: token) {
            try require(!stored.issuer.isEmpty && !stored.subject.isEmpty, "an ID token's claims without issuer or subject")
        }
        let fixtures = fixtures
        for keys in fixtures.keySets {
            do {
                _ = try IDToken.verify(token, keys: keys, issuer: fixtures.issuer, clientID: fixtures.clientID, nonce: fixtures.nonce,
                                       serverNow: Peer.now)
                let signingInput = CompactJWS(token)?.signingInput
                try require(signingInput.map(fixtures.signed.contains) ?? false, "a token verifies whose header and payload no key signed")
            } catch let error as AuthError {
                try requireQuoted(error, "verifying an ID token")
            } catch let violation as PropertyViolation {
                throw violation
            } catch {}
        }
    }

    /// A provider's key set: the key chosen for each algorithm, by id or alone, is one that can
    /// check that algorithm's signatures, with usable numbers.
    @Sendable static func keySet(_ input: [UInt8]) throws(PropertyViolation) {
        let keys: JSONWebKeySet
        do { keys = try JSONWebKeySet(json: input) } catch {
            try requireQuoted(error, "reading a key set")
            return
        }
        let ids: [String?] = [nil] + keys.keys.map(\.id)
        for algorithm in JWSAlgorithm.allCases {
            for id in ids {
                let key: JSONWebKey
                do { key = try keys.key(id: id, for: algorithm) } catch {
                    try requireQuoted(error, "choosing a key")
                    continue
                }
                try require(key.family == algorithm.keyFamily, "\(key.family) chosen for \(algorithm.rawValue)")
                try require(id == nil || key.id == id, "a key chosen for the id \(id ?? "") has another")
                try require(key.algorithm == nil || key.algorithm == algorithm.rawValue, "a key for \(key.algorithm ?? "") chosen for \(algorithm.rawValue)")
                switch key.material {
                case .success(.rsa(let modulus, let exponent)):
                    let bits = modulus.isEmpty ? 0 : (modulus.count - 1) * 8 + (8 - modulus[0].leadingZeroBitCount)
                    try require((JSONWebKey.minimumRSABits...JSONWebKey.maximumRSABits).contains(bits), "an RSA modulus of \(bits) bits")
                    try require(!exponent.isEmpty && exponent.count <= 8 && exponent.last! & 1 == 1, "an unusable RSA exponent")
                case .success(.ellipticCurve(let curve, let x, let y)):
                    try require(x.count == curve.coordinateSize && y.count == curve.coordinateSize, "EC coordinates of the wrong size")
                case .success(.ed25519(let x)):
                    try require(x.count == 32, "an Ed25519 key of \(x.count) bytes")
                case .failure:
                    throw PropertyViolation(description: "an unusable key chosen")
                }
            }
        }
    }
}
