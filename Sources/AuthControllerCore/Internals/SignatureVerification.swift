// SPDX-License-Identifier: Apache-2.0
internal import CGnuTLS

/// JWS signature checks through GnuTLS, loaded on the first check (see `CGnuTLS/shim.h`). The
/// key is imported for each check: a sign-in checks one or two signatures, and no GnuTLS object
/// outlives the call. Does not block beyond the computation (well under a millisecond, plus the
/// loading of GnuTLS the first time).
enum SignatureVerification {
    /// Whether `signature` is `algorithm`'s signature of `data` by `key`. Throws
    /// ``AuthError/unavailable(_:detail:)-enum.case`` when GnuTLS is not installed, and
    /// ``AuthError/protocolError(_:)`` when GnuTLS refuses the key or cannot check the signature.
    /// The corresponding C functions are `gnutls_pubkey_import_rsa_raw`,
    /// `gnutls_pubkey_import_ecc_raw` and `gnutls_pubkey_verify_data2`.
    static func isValid(_ signature: [UInt8], of data: some StringProtocol, algorithm: JWSAlgorithm, key: JSONWebKey.Material,
                        keyName: String) throws(AuthError) -> Bool {
        guard authctl_gnutls_load() == 0 else {
            throw .unavailable("GnuTLS is not installed, and authctl needs it to check the identity an OpenID provider vouches for; install the Debian package libgnutls30")
        }
        let imported: OpaquePointer? = switch key {
        case .rsa(let modulus, let exponent):
            authctl_gnutls_import_rsa(modulus, modulus.count, exponent, exponent.count)
        case .ellipticCurve(let curve, let x, let y):
            authctl_gnutls_import_ec(curve == .p256 ? AUTHCTL_CURVE_P256 : AUTHCTL_CURVE_P384, x, x.count, y, y.count)
        case .ed25519(let x):
            authctl_gnutls_import_ed25519(x, x.count)
        }
        guard let imported else { throw .protocolError("GnuTLS refuses \(keyName) as a public key") }
        defer { authctl_gnutls_free_key(imported) }
        let outcome = Array(data.utf8).withUnsafeBufferPointer { data in
            authctl_gnutls_verify(imported, code(of: algorithm), data.baseAddress, data.count, signature, signature.count)
        }
        switch Int(outcome) {
        case Int(AUTHCTL_SIGNATURE_VALID): return true
        case Int(AUTHCTL_SIGNATURE_INVALID): return false
        default: throw .protocolError("GnuTLS cannot check an \(algorithm.rawValue) signature with \(keyName)")
        }
    }

    private static func code(of algorithm: JWSAlgorithm) -> authctl_jws_algorithm {
        switch algorithm {
        case .rs256: AUTHCTL_JWS_RS256
        case .rs384: AUTHCTL_JWS_RS384
        case .rs512: AUTHCTL_JWS_RS512
        case .ps256: AUTHCTL_JWS_PS256
        case .ps384: AUTHCTL_JWS_PS384
        case .ps512: AUTHCTL_JWS_PS512
        case .es256: AUTHCTL_JWS_ES256
        case .es384: AUTHCTL_JWS_ES384
        case .edDSA: AUTHCTL_JWS_EDDSA
        }
    }
}
