// SPDX-License-Identifier: Apache-2.0
#pragma once
// GnuTLS (libgnutls.so.30), which checks the signatures of OpenID Connect ID tokens, loaded with
// dlopen by the first verification: a library linked into the binary is loaded by every command at
// start-up, and only signing in at an OpenID provider verifies a signature. The few gnutls_*
// entry points are declared in loader.c, so that building needs no GnuTLS headers; verifying needs
// the runtime package libgnutls30 (which glib-networking, libsoup's TLS, already brings).
#include <stddef.h>
#include <stdint.h>

/// The JWS signature algorithms (RFC 7518 §3, RFC 8037) that authctl accepts.
typedef enum {
    AUTHCTL_JWS_RS256, AUTHCTL_JWS_RS384, AUTHCTL_JWS_RS512,
    AUTHCTL_JWS_PS256, AUTHCTL_JWS_PS384, AUTHCTL_JWS_PS512,
    AUTHCTL_JWS_ES256, AUTHCTL_JWS_ES384,
    AUTHCTL_JWS_EDDSA,
} authctl_jws_algorithm;

/// The elliptic curves of the JWK `crv` values authctl accepts.
typedef enum { AUTHCTL_CURVE_P256, AUTHCTL_CURVE_P384 } authctl_ec_curve;

/// A public key (`gnutls_pubkey_t`).
typedef struct authctl_public_key authctl_public_key;

/// The outcome of a verification: the signature holds, it does not, or GnuTLS could not check it.
enum { AUTHCTL_SIGNATURE_VALID = 0, AUTHCTL_SIGNATURE_INVALID = 1, AUTHCTL_SIGNATURE_UNCHECKED = 2 };

/// Loads libgnutls.so.30 and its symbols once (thread-safe). 0 on success; -1 when the library
/// or a symbol is missing.
int authctl_gnutls_load(void);

/// An RSA public key from its big-endian modulus and exponent (`gnutls_pubkey_import_rsa_raw`).
/// NULL when GnuTLS refuses them.
authctl_public_key *authctl_gnutls_import_rsa(const uint8_t *modulus, size_t modulus_size,
                                              const uint8_t *exponent, size_t exponent_size);

/// An EC public key from its big-endian coordinates (`gnutls_pubkey_import_ecc_raw`, then
/// `gnutls_pubkey_verify_params`). NULL when GnuTLS refuses them, a point off the curve among others.
authctl_public_key *authctl_gnutls_import_ec(authctl_ec_curve curve, const uint8_t *x, size_t x_size,
                                             const uint8_t *y, size_t y_size);

/// An Ed25519 public key from its 32 bytes (`gnutls_pubkey_import_ecc_raw` with
/// `GNUTLS_ECC_CURVE_ED25519`). NULL when GnuTLS refuses it.
authctl_public_key *authctl_gnutls_import_ed25519(const uint8_t *x, size_t x_size);

/// `gnutls_pubkey_deinit`.
void authctl_gnutls_free_key(authctl_public_key *key);

/// Checks a JWS signature over `data` (`gnutls_pubkey_verify_data2`). RSA-PSS requires a salt as
/// long as the hash (`GNUTLS_VERIFY_RSA_PSS_FIXED_SALT_LENGTH`), as JWS does; ECDSA signatures
/// come as JWS sends them, r then s of the curve's size each, and are turned into DER here
/// (`gnutls_encode_rs_value`).
int authctl_gnutls_verify(const authctl_public_key *key, authctl_jws_algorithm algorithm,
                          const uint8_t *data, size_t data_size, const uint8_t *signature, size_t signature_size);
