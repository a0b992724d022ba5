// SPDX-License-Identifier: Apache-2.0
#include "shim.h"
#include <dlfcn.h>
#include <pthread.h>

// Why GnuTLS, loaded here, rather than a Swift package (measured 2026-11-24, Swift 6.3.1, static
// release builds, stripped). Against a hello world that decodes JSON with FoundationEssentials
// (13.57 MB, 3.08 M instructions to start and exit), one RS256 check with swift-crypto's
// _CryptoExtras (BoringSSL, linked) adds 4.70 MB and 0.49 M instructions at every start; with
// vapor/jwt-kit 5.8 (whose API fits JOSE best) 8.20 MB and 0.99 M. The budget for all of OpenID
// Connect is 2 MB, and `authctl status` runs 6.9 M instructions in all. With GnuTLS, the binary
// grows by 76 KiB (this loader and the Swift verifier), `status` runs as many instructions as
// before, and only the first check pays for loading GnuTLS (4–6 M instructions, about 1.5 ms);
// then an RS256 check is 0.3 M, ES256 2.2 M, EdDSA 1.5 M. GnuTLS is on every Debian system (apt
// and glib-networking, libsoup's TLS, depend on it) and checks every JWS algorithm authctl accepts
// with one call. libgcrypt, also installed, would cost as little, but needs each hash, padding and
// key spelled out as S-expressions by hand: more code to get wrong for the same result.

// The GnuTLS entry points authctl calls, declared here rather than taken from its headers, so
// that nothing links against it (see shim.h). Signatures, enum values and the flag are those of
// GnuTLS 3.7 (gnutls.h, abstract.h, crypto.h, x509.h); the soname is stable since 3.4.
typedef struct gnutls_pubkey_st *gnutls_pubkey_t;
typedef struct {
    unsigned char *data;
    unsigned int size;
} gnutls_datum_t;
enum {
    GNUTLS_SIGN_RSA_SHA256 = 6, GNUTLS_SIGN_RSA_SHA384 = 7, GNUTLS_SIGN_RSA_SHA512 = 8,
    GNUTLS_SIGN_ECDSA_SHA256 = 14, GNUTLS_SIGN_ECDSA_SHA384 = 15,
    GNUTLS_SIGN_RSA_PSS_SHA256 = 32, GNUTLS_SIGN_RSA_PSS_SHA384 = 33, GNUTLS_SIGN_RSA_PSS_SHA512 = 34,
    GNUTLS_SIGN_EDDSA_ED25519 = 35,
};
enum { GNUTLS_ECC_CURVE_SECP256R1 = 2, GNUTLS_ECC_CURVE_SECP384R1 = 3, GNUTLS_ECC_CURVE_ED25519 = 7 };
enum { GNUTLS_VERIFY_RSA_PSS_FIXED_SALT_LENGTH = 1 << 16 };
enum { GNUTLS_E_PK_SIG_VERIFY_FAILED = -89 };

static struct {
    int (*pubkey_init)(gnutls_pubkey_t *);
    void (*pubkey_deinit)(gnutls_pubkey_t);
    int (*pubkey_import_rsa_raw)(gnutls_pubkey_t, const gnutls_datum_t *, const gnutls_datum_t *);
    int (*pubkey_import_ecc_raw)(gnutls_pubkey_t, int, const gnutls_datum_t *, const gnutls_datum_t *);
    int (*pubkey_verify_data2)(gnutls_pubkey_t, int, unsigned int, const gnutls_datum_t *, const gnutls_datum_t *);
    int (*pubkey_verify_params)(gnutls_pubkey_t);
    int (*encode_rs_value)(gnutls_datum_t *, const gnutls_datum_t *, const gnutls_datum_t *);
    // `gnutls_free` is a variable holding the function, not a function.
    void (**free)(void *);
} gnutls;

static int loaded = -1;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
    void *library = dlopen("libgnutls.so.30", RTLD_NOW | RTLD_LOCAL);
    if (!library) return;
#define SYMBOL(field, name) if (!(*(void **)&gnutls.field = dlsym(library, name))) return;
    SYMBOL(pubkey_init, "gnutls_pubkey_init")
    SYMBOL(pubkey_deinit, "gnutls_pubkey_deinit")
    SYMBOL(pubkey_import_rsa_raw, "gnutls_pubkey_import_rsa_raw")
    SYMBOL(pubkey_import_ecc_raw, "gnutls_pubkey_import_ecc_raw")
    SYMBOL(pubkey_verify_data2, "gnutls_pubkey_verify_data2")
    SYMBOL(pubkey_verify_params, "gnutls_pubkey_verify_params")
    SYMBOL(encode_rs_value, "gnutls_encode_rs_value")
    SYMBOL(free, "gnutls_free")
#undef SYMBOL
    loaded = 0;
}

int authctl_gnutls_load(void) {
    pthread_once(&once, load);
    return loaded;
}

static gnutls_datum_t datum(const uint8_t *bytes, size_t size) {
    return (gnutls_datum_t){.data = (unsigned char *)bytes, .size = (unsigned int)size};
}

// A datum's size is an unsigned int: anything near that is no key or signature authctl accepts.
static int fits(size_t size) { return size <= 1 << 20; }

static authctl_public_key *imported(gnutls_pubkey_t key, int result) {
    if (result < 0) {
        gnutls.pubkey_deinit(key);
        return NULL;
    }
    return (authctl_public_key *)key;
}

authctl_public_key *authctl_gnutls_import_rsa(const uint8_t *modulus, size_t modulus_size,
                                              const uint8_t *exponent, size_t exponent_size) {
    gnutls_pubkey_t key;
    if (!fits(modulus_size) || !fits(exponent_size) || gnutls.pubkey_init(&key) < 0) return NULL;
    gnutls_datum_t m = datum(modulus, modulus_size), e = datum(exponent, exponent_size);
    return imported(key, gnutls.pubkey_import_rsa_raw(key, &m, &e));
}

authctl_public_key *authctl_gnutls_import_ec(authctl_ec_curve curve, const uint8_t *x, size_t x_size,
                                             const uint8_t *y, size_t y_size) {
    gnutls_pubkey_t key;
    if (!fits(x_size) || !fits(y_size) || gnutls.pubkey_init(&key) < 0) return NULL;
    gnutls_datum_t gx = datum(x, x_size), gy = datum(y, y_size);
    int gnutls_curve = curve == AUTHCTL_CURVE_P256 ? GNUTLS_ECC_CURVE_SECP256R1 : GNUTLS_ECC_CURVE_SECP384R1;
    int result = gnutls.pubkey_import_ecc_raw(key, gnutls_curve, &gx, &gy);
    // Importing does not check that the point is on the curve; this does.
    if (result >= 0) result = gnutls.pubkey_verify_params(key);
    return imported(key, result);
}

authctl_public_key *authctl_gnutls_import_ed25519(const uint8_t *x, size_t x_size) {
    gnutls_pubkey_t key;
    if (!fits(x_size) || gnutls.pubkey_init(&key) < 0) return NULL;
    gnutls_datum_t gx = datum(x, x_size);
    return imported(key, gnutls.pubkey_import_ecc_raw(key, GNUTLS_ECC_CURVE_ED25519, &gx, NULL));
}

void authctl_gnutls_free_key(authctl_public_key *key) {
    gnutls.pubkey_deinit((gnutls_pubkey_t)key);
}

static int outcome(int result) {
    if (result >= 0) return AUTHCTL_SIGNATURE_VALID;
    return result == GNUTLS_E_PK_SIG_VERIFY_FAILED ? AUTHCTL_SIGNATURE_INVALID : AUTHCTL_SIGNATURE_UNCHECKED;
}

int authctl_gnutls_verify(const authctl_public_key *key, authctl_jws_algorithm algorithm,
                          const uint8_t *data, size_t data_size, const uint8_t *signature, size_t signature_size) {
    if (!fits(data_size) || !fits(signature_size)) return AUTHCTL_SIGNATURE_UNCHECKED;
    gnutls_pubkey_t pubkey = (gnutls_pubkey_t)key;
    gnutls_datum_t message = datum(data, data_size), raw = datum(signature, signature_size);
    unsigned int flags = 0;
    int sign;
    size_t coordinate = 0;
    switch (algorithm) {
    case AUTHCTL_JWS_RS256: sign = GNUTLS_SIGN_RSA_SHA256; break;
    case AUTHCTL_JWS_RS384: sign = GNUTLS_SIGN_RSA_SHA384; break;
    case AUTHCTL_JWS_RS512: sign = GNUTLS_SIGN_RSA_SHA512; break;
    case AUTHCTL_JWS_PS256: sign = GNUTLS_SIGN_RSA_PSS_SHA256; flags = GNUTLS_VERIFY_RSA_PSS_FIXED_SALT_LENGTH; break;
    case AUTHCTL_JWS_PS384: sign = GNUTLS_SIGN_RSA_PSS_SHA384; flags = GNUTLS_VERIFY_RSA_PSS_FIXED_SALT_LENGTH; break;
    case AUTHCTL_JWS_PS512: sign = GNUTLS_SIGN_RSA_PSS_SHA512; flags = GNUTLS_VERIFY_RSA_PSS_FIXED_SALT_LENGTH; break;
    case AUTHCTL_JWS_ES256: sign = GNUTLS_SIGN_ECDSA_SHA256; coordinate = 32; break;
    case AUTHCTL_JWS_ES384: sign = GNUTLS_SIGN_ECDSA_SHA384; coordinate = 48; break;
    case AUTHCTL_JWS_EDDSA: sign = GNUTLS_SIGN_EDDSA_ED25519; break;
    default: return AUTHCTL_SIGNATURE_UNCHECKED;
    }
    if (!coordinate) return outcome(gnutls.pubkey_verify_data2(pubkey, sign, flags, &message, &raw));
    // A JWS ECDSA signature is r || s, each as long as the curve's order; GnuTLS takes DER.
    if (signature_size != 2 * coordinate) return AUTHCTL_SIGNATURE_INVALID;
    gnutls_datum_t r = datum(signature, coordinate), s = datum(signature + coordinate, coordinate), der = {0};
    if (gnutls.encode_rs_value(&der, &r, &s) < 0) return AUTHCTL_SIGNATURE_UNCHECKED;
    int result = outcome(gnutls.pubkey_verify_data2(pubkey, sign, 0, &message, &der));
    (*gnutls.free)(der.data);
    return result;
}
