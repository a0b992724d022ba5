// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

/// The signature algorithms an ID token may be signed with (RFC 7518 §3, RFC 8037 §3.1): RSA
/// (PKCS #1 v1.5 and PSS), ECDSA on P-256 and P-384, and EdDSA on Ed25519. `none` and the
/// shared-secret HMAC algorithms are not among them: an ID token must be signed with a key only
/// the provider holds.
enum JWSAlgorithm: String, Sendable, CaseIterable {
    case rs256 = "RS256", rs384 = "RS384", rs512 = "RS512"
    case ps256 = "PS256", ps384 = "PS384", ps512 = "PS512"
    case es256 = "ES256", es384 = "ES384"
    case edDSA = "EdDSA"

    /// The kind of key that makes this algorithm's signatures.
    var keyFamily: JSONWebKey.Family {
        switch self {
        case .rs256, .rs384, .rs512, .ps256, .ps384, .ps512: .rsa
        case .es256: .ellipticCurve(.p256)
        case .es384: .ellipticCurve(.p384)
        case .edDSA: .ed25519
        }
    }
}

/// One signing key of a provider's key set (RFC 7517 §4), as far as authctl can use it.
struct JSONWebKey: Sendable {
    /// A NIST curve that ECDSA keys may be on.
    enum Curve: String, Sendable, Hashable {
        case p256 = "P-256", p384 = "P-384"

        /// How many bytes a coordinate, and each half of a JWS signature, takes.
        var coordinateSize: Int { self == .p256 ? 32 : 48 }
    }

    /// The kind of a key: its `kty` and, for curves, its `crv`.
    enum Family: Sendable, Hashable, CustomStringConvertible {
        case rsa
        case ellipticCurve(Curve)
        case ed25519

        /// How a message names the kind of key ("an RSA key").
        var description: String {
            switch self {
            case .rsa: "an RSA key"
            case .ellipticCurve(let curve): "an EC \(curve.rawValue) key"
            case .ed25519: "an Ed25519 key"
            }
        }
    }

    /// The public key's numbers, big-endian as the JWK holds them.
    enum Material: Sendable {
        case rsa(modulus: [UInt8], exponent: [UInt8])
        case ellipticCurve(Curve, x: [UInt8], y: [UInt8])
        case ed25519(x: [UInt8])
    }

    /// The smallest RSA modulus accepted, in bits (RFC 7518 §3.3 requires 2048).
    static let minimumRSABits = 2048
    /// The largest RSA modulus accepted, in bits: a bound on the work a hostile key set can cause.
    static let maximumRSABits = 16_384

    /// The key's `kid`, when it has one.
    let id: String?
    /// The key's `alg`, when it names one: the key then signs with that algorithm only.
    let algorithm: String?
    /// Its kind.
    let family: Family
    /// Its numbers, or why they cannot be used (too short an RSA modulus, a malformed member).
    let material: Result<Material, Refusal>

    /// Why a key of a known kind cannot be used, in words for a message.
    struct Refusal: Error, Sendable {
        let reason: String
    }

    /// How a message names the key: "the provider's key 'KID'", or by its kind when it has no id.
    var displayName: String {
        if let id { "the provider's key '\(TokenExchange.quote(id))'" } else { "the provider's \(family) without an id" }
    }
}

/// A provider's JSON Web Key Set (RFC 7517 §5), the public keys that check its ID tokens.
///
/// Keys authctl cannot use are left out: a `kty` other than `RSA`, `EC` or `OKP`, a curve other
/// than P-256, P-384 or Ed25519, or a `use` other than `sig`. Keys of a known kind that are
/// unfit stay in the set with the reason, so that a token signed with one fails naming it: an RSA
/// modulus under 2048 bits, or a member that is missing or not base64url.
struct JSONWebKeySet: Sendable {
    /// The usable keys, in the set's order.
    let keys: [JSONWebKey]

    /// Parses the key set served at the provider's `jwks_uri`. Throws
    /// ``AuthError/protocolError(_:)`` when it is not a JSON object with a `keys` array.
    init(json: [UInt8]) throws(AuthError) {
        struct Document: Decodable { var keys: [Entry] }
        // An entry that is not a JSON object of string members decodes as nil and is left out.
        struct Entry: Decodable {
            var members: Members?
            init(from decoder: any Decoder) throws { members = try? Members(from: decoder) }
        }
        struct Members: Decodable {
            var kty: String
            var use: String?
            var kid: String?
            var alg: String?
            var crv: String?
            var n: String?
            var e: String?
            var x: String?
            var y: String?
        }
        guard let document = try? JSONDecoder().decode(Document.self, from: Data(json)) else {
            throw .protocolError("the provider's key set (jwks_uri) is not a JSON object with a 'keys' array")
        }
        keys = document.keys.compactMap { entry in
            guard let members = entry.members, members.use == nil || members.use == "sig" else { return nil }
            let family: JSONWebKey.Family
            switch (members.kty, members.crv) {
            case ("RSA", _): family = .rsa
            case ("EC", let curve?): guard let curve = JSONWebKey.Curve(rawValue: curve) else { return nil }
                family = .ellipticCurve(curve)
            case ("OKP", "Ed25519"): family = .ed25519
            default: return nil
            }
            return JSONWebKey(id: members.kid, algorithm: members.alg, family: family,
                              material: Self.material(of: family, n: members.n, e: members.e, x: members.x, y: members.y))
        }
    }

    /// Whether the set holds a usable key whose `kid` is `id`. A token that names a `kid` the set
    /// lacks is the sign to fetch the key set again, once: the provider may have rotated its keys.
    func hasKey(id: String) -> Bool {
        keys.contains { $0.id == id }
    }

    /// The key that checks a signature made with `algorithm`: the one named `id` whose kind fits
    /// the algorithm; without an id, the set's only key whose kind fits. Throws
    /// ``AuthError/protocolError(_:)`` naming what is missing or unfit.
    func key(id: String?, for algorithm: JWSAlgorithm) throws(AuthError) -> JSONWebKey {
        let candidates: [JSONWebKey]
        if let id {
            let named = keys.filter { $0.id == id }
            guard let first = named.first else {
                throw .protocolError("the ID token names the key '\(TokenExchange.quote(id))', which the provider's key set does not have")
            }
            candidates = named.filter { $0.family == algorithm.keyFamily }
            // The "algorithm confusion" attack: a token whose header names an algorithm of another
            // kind than its key's.
            guard !candidates.isEmpty else {
                throw .protocolError("\(first.displayName) is \(first.family), which cannot check an ID token signed with \(algorithm.rawValue)")
            }
        } else {
            candidates = keys.filter { $0.family == algorithm.keyFamily }
            guard candidates.count == 1 else {
                throw .protocolError(candidates.isEmpty
                    ? "the ID token names no key, and the provider's key set has none for \(algorithm.rawValue)"
                    : "the ID token names no key, and the provider's key set has several for \(algorithm.rawValue)")
            }
        }
        let key = candidates[0]
        if let declared = key.algorithm, declared != algorithm.rawValue {
            throw .protocolError("\(key.displayName) is for \(TokenExchange.quote(declared)), not for the ID token's \(algorithm.rawValue)")
        }
        if case .failure(let refusal) = key.material {
            throw .protocolError("\(key.displayName) cannot be used: \(refusal.reason)")
        }
        return key
    }

    private static func material(of family: JSONWebKey.Family, n: String?, e: String?, x: String?, y: String?)
        -> Result<JSONWebKey.Material, JSONWebKey.Refusal> {
        func member(_ name: String, _ text: String?) -> Result<[UInt8], JSONWebKey.Refusal> {
            guard let text else { return .failure(.init(reason: "it has no '\(name)'")) }
            guard let bytes = Base64URL.decode(text), !bytes.isEmpty else { return .failure(.init(reason: "its '\(name)' is not base64url")) }
            return .success(bytes)
        }
        do throws(JSONWebKey.Refusal) {
            switch family {
            case .rsa:
                let modulus = Array(try member("n", n).get().drop { $0 == 0 })
                let exponent = Array(try member("e", e).get().drop { $0 == 0 })
                let bits = modulus.isEmpty ? 0 : (modulus.count - 1) * 8 + (8 - modulus[0].leadingZeroBitCount)
                guard bits >= JSONWebKey.minimumRSABits else {
                    throw .init(reason: "its RSA modulus has \(bits) bits, and authctl accepts \(JSONWebKey.minimumRSABits) or more")
                }
                guard bits <= JSONWebKey.maximumRSABits else {
                    throw .init(reason: "its RSA modulus has \(bits) bits, more than the \(JSONWebKey.maximumRSABits) authctl accepts")
                }
                guard !exponent.isEmpty, exponent.count <= 8, exponent.last! & 1 == 1 else { throw .init(reason: "its RSA exponent is not valid") }
                return .success(.rsa(modulus: modulus, exponent: exponent))
            case .ellipticCurve(let curve):
                let xBytes = try member("x", x).get(), yBytes = try member("y", y).get()
                guard xBytes.count == curve.coordinateSize, yBytes.count == curve.coordinateSize else {
                    throw .init(reason: "its coordinates are not \(curve.coordinateSize) bytes each, as \(curve.rawValue) requires")
                }
                return .success(.ellipticCurve(curve, x: xBytes, y: yBytes))
            case .ed25519:
                let xBytes = try member("x", x).get()
                guard xBytes.count == 32 else { throw .init(reason: "its 'x' is not the 32 bytes of an Ed25519 key") }
                return .success(.ed25519(x: xBytes))
            }
        } catch {
            return .failure(error)
        }
    }
}
