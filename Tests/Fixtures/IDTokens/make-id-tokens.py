#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes id-tokens.json: the keys and signed ID tokens of the ID-token verification tests
(Tests/AuthControllerTests/IDTokenTests.swift).

Run it again (`python3 make-id-tokens.py`) only to change the fixtures: keys are new at every run,
so the output differs each time, and the tests take whatever it wrote. Times are fixed (the tests
pass the server's clock), so the tokens never age. Needs the `cryptography` package.
"""
import base64
import hashlib
import hmac
import json
import os

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

ISSUER = "https://id.example.com/realms/desk"
CLIENT_ID = "authctl"
NONCE = "n-0S6_WzA2Mj"
ISSUED_AT = 1_900_000_000
EXPIRES_AT = ISSUED_AT + 3600


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def integer(value: int) -> str:
    return b64(value.to_bytes((value.bit_length() + 7) // 8, "big"))


def rsa_jwk(key, kid):
    numbers = key.public_key().public_numbers()
    jwk = {"kty": "RSA", "use": "sig", "n": integer(numbers.n), "e": integer(numbers.e)}
    if kid:
        jwk["kid"] = kid
    return jwk


def ec_jwk(key, kid, crv, size):
    numbers = key.public_key().public_numbers()
    return {"kty": "EC", "crv": crv, "kid": kid,
            "x": b64(numbers.x.to_bytes(size, "big")), "y": b64(numbers.y.to_bytes(size, "big"))}


def ed_jwk(key, kid):
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
    raw = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return {"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": b64(raw)}


rsa_1 = rsa.generate_private_key(public_exponent=65537, key_size=2048)
rsa_2 = rsa.generate_private_key(public_exponent=65537, key_size=2048)
rsa_weak = rsa.generate_private_key(public_exponent=65537, key_size=1024)
ec_256 = ec.generate_private_key(ec.SECP256R1())
ec_384 = ec.generate_private_key(ec.SECP384R1())
ec_521 = ec.generate_private_key(ec.SECP521R1())
ed_1 = ed25519.Ed25519PrivateKey.generate()

HASHES = {"256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}


def sign(alg, key, data, salt=None):
    if alg.startswith("RS"):
        return key.sign(data, padding.PKCS1v15(), HASHES[alg[2:]]())
    if alg.startswith("PS"):
        digest = HASHES[alg[2:]]()
        return key.sign(data, padding.PSS(padding.MGF1(digest), salt if salt is not None else digest.digest_size), digest)
    if alg.startswith("ES"):
        size = {"256": 32, "384": 48}[alg[2:]]
        r, s = decode_dss_signature(key.sign(data, ec.ECDSA(HASHES[alg[2:]]())))
        return r.to_bytes(size, "big") + s.to_bytes(size, "big")
    if alg == "EdDSA":
        return key.sign(data)
    if alg.startswith("HS"):
        return hmac.new(key, data, getattr(hashlib, "sha" + alg[2:])).digest()
    raise ValueError(alg)


def claims(**changes):
    base = {"iss": ISSUER, "aud": CLIENT_ID, "sub": "248289761001", "iat": ISSUED_AT, "exp": EXPIRES_AT,
            "nonce": NONCE, "email": "jane@example.com", "email_verified": True, "name": "Jane Doe",
            "preferred_username": "jane", "upn": "jane.doe@corp.example.com", "groups": ["staff"],
            "employee_number": 1042}
    base.update(changes)
    return {name: value for name, value in base.items() if value is not None}


def token(alg, key, kid, payload, header_alg=None, salt=None, raw_payload=None):
    header = {"alg": header_alg or alg, "typ": "JWT"}
    if kid:
        header["kid"] = kid
    body = raw_payload if raw_payload is not None else json.dumps(payload).encode()
    signing_input = (b64(json.dumps(header).encode()) + "." + b64(body)).encode()
    return signing_input.decode() + "." + b64(sign(alg, key, signing_input, salt))


unknown_keys = [
    {"kty": "oct", "kid": "hmac", "k": b64(os.urandom(32))},
    dict(rsa_jwk(rsa_2, "encryption"), use="enc"),
    ec_jwk(ec_521, "ec-521", "P-521", 66),
]
main_set = [rsa_jwk(rsa_1, "rsa-1"), ec_jwk(ec_256, "ec-256", "P-256", 32), ec_jwk(ec_384, "ec-384", "P-384", 48),
            ed_jwk(ed_1, "ed-1")] + unknown_keys

tokens = {}
for alg in ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512"]:
    tokens[alg] = token(alg, rsa_1, "rsa-1", claims())
tokens["ES256"] = token("ES256", ec_256, "ec-256", claims())
tokens["ES384"] = token("ES384", ec_384, "ec-384", claims())
tokens["EdDSA"] = token("EdDSA", ed_1, "ed-1", claims())
tokens["RS256 without kid"] = token("RS256", rsa_1, None, claims())
tokens["ES256 without kid"] = token("ES256", ec_256, None, claims())
tokens["PS256 with a salt of 0"] = token("PS256", rsa_1, "rsa-1", claims(), salt=0)
tokens["RS256 naming the P-256 key"] = token("RS256", rsa_1, "ec-256", claims())
tokens["ES384 naming the P-256 key"] = token("ES384", ec_384, "ec-256", claims())
tokens["HS256 keyed with the RSA key's modulus"] = token("HS256", rsa_jwk(rsa_1, None)["n"].encode(), "rsa-1", claims())
tokens["RS256 naming an unknown kid"] = token("RS256", rsa_2, "rsa-2", claims())
tokens["RS256 by the 1024-bit key"] = token("RS256", rsa_weak, "weak", claims())
tokens["another issuer"] = token("RS256", rsa_1, "rsa-1", claims(iss="https://evil.example.com/realms/desk"))
tokens["issuer with a trailing slash"] = token("RS256", rsa_1, "rsa-1", claims(iss=ISSUER + "/"))
tokens["another audience"] = token("RS256", rsa_1, "rsa-1", claims(aud="someone-else"))
tokens["audiences with azp"] = token("RS256", rsa_1, "rsa-1", claims(aud=[CLIENT_ID, "api"], azp=CLIENT_ID))
tokens["audiences without azp"] = token("RS256", rsa_1, "rsa-1", claims(aud=[CLIENT_ID, "api"]))
tokens["audiences with another azp"] = token("RS256", rsa_1, "rsa-1", claims(aud=[CLIENT_ID, "api"], azp="api"))
tokens["audiences without the client"] = token("RS256", rsa_1, "rsa-1", claims(aud=["api", "web"], azp="api"))
tokens["no nonce"] = token("RS256", rsa_1, "rsa-1", claims(nonce=None))
tokens["no sub"] = token("RS256", rsa_1, "rsa-1", claims(sub=None))
tokens["no exp"] = token("RS256", rsa_1, "rsa-1", claims(exp=None))
tokens["email_verified as strings"] = token("RS256", rsa_1, "rsa-1", claims(email_verified="false"))
tokens["only sub"] = token("RS256", rsa_1, "rsa-1", {"iss": ISSUER, "aud": CLIENT_ID, "sub": "u-7", "iat": ISSUED_AT,
                                                    "exp": EXPIRES_AT})
tokens["payload is an array"] = token("RS256", rsa_1, "rsa-1", None, raw_payload=b'["iss", "aud"]')
tokens["refreshed"] = token("RS256", rsa_1, "rsa-1", claims(nonce=None, iat=ISSUED_AT + 1800, exp=EXPIRES_AT + 1800))
tokens["refreshed for another subject"] = token("RS256", rsa_1, "rsa-1", claims(nonce=None, sub="99", iat=ISSUED_AT + 1800,
                                                                              exp=EXPIRES_AT + 1800))
tokens["refreshed with an added audience"] = token("RS256", rsa_1, "rsa-1", claims(nonce=None, aud=[CLIENT_ID, "api"],
                                                                                 azp=CLIENT_ID))

fixtures = {
    "issuer": ISSUER,
    "clientID": CLIENT_ID,
    "nonce": NONCE,
    "issuedAt": ISSUED_AT,
    "expiresAt": EXPIRES_AT,
    "keySets": {
        "main": json.dumps({"keys": main_set}),
        "two RSA keys": json.dumps({"keys": [rsa_jwk(rsa_1, None), rsa_jwk(rsa_2, None)]}),
        "weak": json.dumps({"keys": [rsa_jwk(rsa_weak, "weak")]}),
        "only unusable keys": json.dumps({"keys": unknown_keys}),
    },
    "tokens": tokens,
}
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "id-tokens.json"), "w") as output:
    json.dump(fixtures, output, indent=1, sort_keys=True)
    output.write("\n")
