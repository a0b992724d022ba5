#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A scripted OpenID Connect provider for authctl's fault tests, on 127.0.0.1: it answers as a
test tells it to, including the faults no real provider produces on demand, and logs every request.

The issuer is http://127.0.0.1:PORT/p. Endpoints (under the issuer):
  GET  /.well-known/openid-configuration   discovery
  GET  /jwks                               the signing key (RS256, kid "k1")
  GET  /authorize                          302 straight back to redirect_uri with the configured
                                           callback parameters: no person is needed
  POST /token                              authorization_code, device_code and refresh_token grants
  POST /device                             device authorization (RFC 8628)
  GET  /userinfo                           the person's claims
  POST /revoke                             RFC 7009
Control (outside the issuer): POST /_config (JSON merged into the configuration), GET /_log.

Every endpoint's answer can be scripted: config "script" maps an endpoint name (discovery, jwks,
authorize, token, device, userinfo, revoke) to a list of answers used up in order, each
{"status", "json" or "body", "headers", "delay", "drop", "oversized"}; an answer may also be
{"tokens": {...}} for a token answer whose members are merged into the normal one (null removes
a member), or {"default": true} for the normal answer. Once the list is empty the endpoint answers
normally.

It prints "listening PORT" on its first line once it accepts connections. It signs ID tokens with
`cryptography` (the identity provider's virtual environment has it, and ScriptedProvider.swift
starts it with that Python); without it, it still runs, but issues no ID token and serves no key.
"""
import base64
import email.utils
import hashlib
import hmac
import json
import socket
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# No __pycache__ beside the test target's sources, where SwiftPM would find it.
sys.dont_write_bytecode = True
from serving import serve_until_stdin_closes  # noqa: E402

try:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding, rsa
except ImportError:
    rsa = None
keys = {}
keys_lock = threading.Lock()


def key(name):
    """The RSA key `name` ("signing" or "other"), made on first use: dozens of providers start at
    once in a test run, and most never sign anything. None without `cryptography`."""
    if rsa is None:
        return None
    with keys_lock:
        if name not in keys:
            keys[name] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        return keys[name]

lock = threading.Lock()
config = {
    "discovery": {},        # members merged into the discovery document (null removes one)
    # The callback's parameters, in order: "$code" a fresh code, "$state" the state sent,
    # "$iss" the issuer; any other value as it is.
    "callback": [["code", "$code"], ["state", "$state"], ["iss", "$iss"]],
    "person": {"sub": "sub-ada", "email": "ada@example.org", "email_verified": True,
               "preferred_username": "ada", "name": "Ada Lovelace"},
    "userinfo": {},         # members merged into userinfo's answer (null removes one)
    "id_token": False,      # token answers carry an ID token
    "id_token_claims": {},  # claims merged into the ID token's (null removes one; {"$now": S} a time S s from now)
    "id_token_header": {},  # header members merged (null removes one)
    # How the ID token is signed: "rs256", "other_key" (a key the JWKS does not hold),
    # "none" (alg none, empty signature), "hs256" (HMAC with the JWKS's modulus as the secret),
    # "tampered" (a valid signature over another payload).
    "id_token_signing": "rs256",
    "device": {},           # members merged into the device authorization answer
    "pending_polls": 0,     # device polls answered authorization_pending before the tokens
    "script": {},
}
log = []
codes = {}            # code -> nonce of its authorization request
serial = [0]


def issuer(port):
    return "http://127.0.0.1:%d/p" % port


def merged(base, overrides):
    result = dict(base)
    for key, value in overrides.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwk(key):
    numbers = key.public_key().public_numbers()

    def integer(value):
        return b64(value.to_bytes((value.bit_length() + 7) // 8, "big"))
    return {"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256", "n": integer(numbers.n), "e": integer(numbers.e)}


def id_token(port, nonce):
    now = int(time.time())
    with lock:
        person = dict(config["person"])
        claims = merged({"iss": issuer(port), "aud": "scripted-client", "iat": now, "exp": now + 300, **person},
                        config["id_token_claims"])
        signing = config["id_token_signing"]
        header_overrides = dict(config["id_token_header"])
    if nonce is not None and "nonce" not in config["id_token_claims"]:
        claims["nonce"] = nonce
    # {"$now": SECONDS}: a time that many seconds from now (negative: ago).
    claims = {k: now + v["$now"] if isinstance(v, dict) and "$now" in v else v for k, v in claims.items()}
    alg = {"none": "none", "hs256": "HS256"}.get(signing, "RS256")
    header = merged({"alg": alg, "typ": "JWT", "kid": "k1"}, header_overrides)
    signed = (b64(json.dumps(header).encode()) + "." + b64(json.dumps(claims).encode())).encode()
    if signing == "none":
        return signed.decode() + "."
    if signing == "hs256":
        secret = jwk(key("signing"))["n"].encode()
        return signed.decode() + "." + b64(hmac.new(secret, signed, hashlib.sha256).digest())
    signature = key("other" if signing == "other_key" else "signing").sign(signed, padding.PKCS1v15(), hashes.SHA256())
    if signing == "tampered":
        claims["sub"] = "sub-mallory"
        signed = (b64(json.dumps(header).encode()) + "." + b64(json.dumps(claims).encode())).encode()
    return signed.decode() + "." + b64(signature)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    @property
    def port(self):
        return self.server.server_address[1]

    def do_GET(self):
        self.handle_request("GET", b"")

    def do_POST(self):
        self.handle_request("POST", self.rfile.read(int(self.headers.get("Content-Length") or 0)))

    def handle_request(self, method, body):
        path, _, query = self.path.partition("?")
        if path == "/_config":
            with lock:
                config.update(json.loads(body))
                return self.reply(200, config)
        if path == "/_log":
            with lock:
                return self.reply(200, log)
        endpoint = {"/p/.well-known/openid-configuration": "discovery", "/p/jwks": "jwks", "/p/authorize": "authorize",
                    "/p/token": "token", "/p/device": "device", "/p/userinfo": "userinfo", "/p/revoke": "revoke"}.get(path)
        fields = {k: v[0] for k, v in urllib.parse.parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).items()}
        with lock:
            entry = {"endpoint": endpoint or path, "method": method, "path": path, "query": query, "fields": fields,
                     "authorization": self.headers.get("Authorization"), "accept": self.headers.get("Accept"),
                     "userAgent": self.headers.get("User-Agent"), "time": time.time()}
            if endpoint == "token":
                grant = fields.get("grant_type")
                entry["grant"] = {"authorization_code": "code", "refresh_token": "refresh",
                                  "urn:ietf:params:oauth:grant-type:device_code": "device_poll"}.get(grant, grant)
            log.append(entry)
            answers = config["script"].get(endpoint) if endpoint else None
            scripted = answers.pop(0) if answers else None
        if scripted is not None:
            if "delay" in scripted:
                time.sleep(scripted["delay"])
            if "tokens" in scripted:
                return self.token(fields, entry, extra=scripted["tokens"])
            if not scripted.get("default"):
                return self.answer_scripted(scripted, entry)
        if endpoint is None:
            return self.reply(404, {"error": "not_found"})
        getattr(self, endpoint)(fields if method == "POST" else dict(urllib.parse.parse_qsl(query)), entry)

    # -- endpoints

    def discovery(self, _, entry):
        base = issuer(self.port)
        with lock:
            overrides = dict(config["discovery"])
        self.reply(200, merged({
            "issuer": base, "authorization_endpoint": base + "/authorize", "token_endpoint": base + "/token",
            "device_authorization_endpoint": base + "/device", "userinfo_endpoint": base + "/userinfo",
            "revocation_endpoint": base + "/revoke", "jwks_uri": base + "/jwks",
            "response_types_supported": ["code"], "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
        }, overrides))

    def jwks(self, _, entry):
        self.reply(200, {"keys": [jwk(key("signing"))] if rsa else []})

    def authorize(self, query, entry):
        with lock:
            serial[0] += 1
            code = "code-%d-%s" % (serial[0], uuid.uuid4().hex[:8])
            codes[code] = query.get("nonce")
            parameters = [[name, value] for name, value in config["callback"]]
        replace = {"$code": code, "$state": query.get("state", ""), "$iss": issuer(self.port)}
        encoded = urllib.parse.urlencode([(name, replace.get(value, value)) for name, value in parameters])
        redirect = query.get("redirect_uri", "")
        self.send_raw(302, b"", {"Location": redirect + ("&" if "?" in redirect else "?") + encoded})

    def token(self, fields, entry, extra=None):
        grant = fields.get("grant_type")
        with lock:
            if entry["grant"] == "device_poll" and extra is None and config["pending_polls"] > 0:
                config["pending_polls"] -= 1
                pending = True
            else:
                pending = False
            nonce = codes.pop(fields.get("code"), None) if grant == "authorization_code" else None
            wants_id_token = config["id_token"]
            serial[0] += 1
            number = serial[0]
        if pending:
            return self.reply(400, {"error": "authorization_pending"})
        answer = {"access_token": "access-%d" % number, "token_type": "Bearer", "expires_in": 300,
                  "refresh_token": "refresh-%d" % number, "scope": "openid profile email"}
        if wants_id_token and rsa:
            answer["id_token"] = id_token(self.port, nonce)
        answer = merged(answer, extra or {})
        with lock:
            entry["answered"] = "tokens"
        self.reply(200, answer)

    def device(self, fields, entry):
        base = issuer(self.port)
        with lock:
            overrides = dict(config["device"])
        self.reply(200, merged({
            "device_code": "device-code-%s" % uuid.uuid4().hex, "user_code": "WDJB-MJHT", "verification_uri": base + "/activate",
            "verification_uri_complete": base + "/activate?user_code=WDJB-MJHT", "expires_in": 600, "interval": 1,
        }, overrides))

    def userinfo(self, _, entry):
        with lock:
            answer = merged(config["person"], config["userinfo"])
        self.reply(200, answer)

    def revoke(self, fields, entry):
        self.send_raw(200, b"", {})

    # -- answers

    def answer_scripted(self, scripted, entry):
        if scripted.get("drop"):
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if "oversized" in scripted:
            body = b'{"pad":"' + b"x" * scripted["oversized"] + b'"}'
            return self.send_raw(200, body, {"Content-Type": "application/json"})
        if "json" in scripted:
            body, headers = json.dumps(scripted["json"]).encode(), {"Content-Type": "application/json"}
        else:
            body, headers = scripted.get("body", "").encode(), {}
        with lock:
            entry["answered"] = "scripted %d" % scripted.get("status", 200)
        self.send_raw(scripted.get("status", 200), body, {**headers, **scripted.get("headers", {})})

    def reply(self, status, value):
        self.send_raw(status, json.dumps(value).encode(), {"Content-Type": "application/json"})

    def send_raw(self, status, body, headers):
        self.send_response_only(status)
        self.send_header("Date", email.utils.formatdate(time.time(), usegmt=True))
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    serve_until_stdin_closes(server)


if __name__ == "__main__":
    main()
