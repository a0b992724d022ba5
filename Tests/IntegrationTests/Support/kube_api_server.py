#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A Kubernetes API server for authctl's tests, on 127.0.0.1 over HTTPS: just enough of the API
for the real kubectl (Debian 12's 1.20) to run `kubectl get namespaces` and `kubectl version`,
to whoever sends a Bearer token the test identity provider stands behind, judged as the API
server's own authenticators judge it.

  kube_api_server.py --dir DIR [--issuer URL --jwks URL --audience CLIENT_ID] [--userinfo URL]
                     [--port N] [--namespace NAME]...

At start it makes a CA of its own and, signed by it, a certificate for the IP address 127.0.0.1,
and writes DIR/ca.pem (the kubeconfig's `certificate-authority`); the keys stay in memory.

Every API request needs `Authorization: Bearer T`. T is accepted
  - as an ID token (`--issuer`, `--jwks`, `--audience`), as the OIDC authenticator
    (`--oidc-issuer-url`, `--oidc-client-id`) accepts it: a JWT whose `iss` is the issuer exactly,
    signed with RS256 by a key of the provider's JWKS (fetched at the first ID token, fetched again
    when a token names a key it does not hold), whose `aud` is or contains the audience, whose
    `exp` has not passed, and which has a `sub`;
  - as an access token (`--userinfo`), as a webhook authenticator would: when the provider's
    userinfo endpoint answers 200 to it as a Bearer token, asked at every request.
Either or both may be configured; T is accepted when one of them accepts it. Anything else gets
`401` and a `Status` (reason `Unauthorized`), which kubectl reports as "You must be logged in to
the server (Unauthorized)". A provider that cannot be reached makes the token refused.

The API: GET /version, the discovery documents /api, /apis, /api/v1 (namespaces only, no API
groups), /api/v1/namespaces (the `--namespace` names, default `default` and `kube-system`; as a
server-side printed `Table` when the client asks for one, as kubectl's human-readable output does)
and /api/v1/namespaces/NAME. Other paths answer a `404` Status.

  control: GET /_stats (JSON: `requests` (API requests), `unauthorized`, `accepted`, `tokens`
           (the last 8 characters of each token, in the order first seen), `kinds` (how many
           requests were accepted as `idToken` and as `accessToken`), `jwksFetches`,
           `userinfoChecks`, `handshakeFailures` (TLS handshakes that failed: a client that does
           not trust the CA)), GET /_log (every API request: `method`, `path`, `query`, `status`,
           `token`, `kind`, `refusal` (why the token was refused), `userAgent`, `time`)

The control endpoints need no token, and they alone are also served over plain HTTP on the same
port (the server tells TLS from HTTP by the first byte), so a test reads them without the CA; the
API over plain HTTP answers `400`.

It prints "listening PORT" on its first line once it accepts connections, and ends when its
standard input (a pipe) closes. It runs with the identity provider's Python environment
(.build/identity-provider-venv), for `cryptography`.
"""
import argparse
import base64
import datetime
import ipaddress
import json
import os
import socket
import ssl
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from http.server import ThreadingHTTPServer

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# No __pycache__ beside the test target's sources, where SwiftPM would find it.
sys.dont_write_bytecode = True
import serving  # noqa: E402
from serving import serve_until_stdin_closes  # noqa: E402

record = serving.Record(requests=0, unauthorized=0, accepted=0, tokens=[], kinds={"idToken": 0, "accessToken": 0},
                        jwksFetches=0, userinfoChecks=0, handshakeFailures=0)
settings = {"issuer": None, "jwks": None, "audience": None, "userinfo": None, "namespaces": [], "started": 0.0}
# The provider's signing keys by kid, as last fetched.
keys = {}
# One JWKS fetch at a time: requests that arrive together with a new key fetch it once.
jwks_lock = threading.Lock()

UNAUTHORIZED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "Unauthorized", "reason": "Unauthorized", "code": 401}


def fingerprint(token):
    # Enough of a token to tell tokens apart in a test, not enough to use it. The end, not the
    # start: every ID token of one provider starts with the same header.
    return token[-8:]


# MARK: Certificates

def make_certificates(folder):
    """A CA and a certificate for 127.0.0.1 that it signed; writes the CA's to FOLDER/ca.pem and
    returns the files of the server's certificate chain and key (private, removed once loaded)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    # An hour back: a client whose clock is slightly behind still finds the certificates valid.
    not_before, not_after = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=2)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube_api_server.py test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(not_before).not_valid_after(not_after)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = (x509.CertificateBuilder()
              .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])).issuer_name(ca_name)
              .public_key(server_key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(not_before).not_valid_after(not_after)
              # Go checks the IP address against the IP SANs only, never the common name.
              .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
              .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
              .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
              .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
              .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "ca.pem.tmp"), "wb") as file:
        file.write(ca.public_bytes(pem))
    os.replace(os.path.join(folder, "ca.pem.tmp"), os.path.join(folder, "ca.pem"))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    # ssl loads a key from a file only: one readable by this process alone, gone once loaded.
    with tempfile.NamedTemporaryFile(dir=folder, prefix=".server-", suffix=".pem") as chain:
        chain.write(server_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        chain.write(server.public_bytes(pem))
        chain.flush()
        context.load_cert_chain(chain.name)
    return context


# MARK: Tokens

def b64decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def fetch_keys():
    with record.lock:
        record.stats["jwksFetches"] += 1
    with urllib.request.urlopen(settings["jwks"], timeout=30) as answer:
        document = json.load(answer)
    fetched = {}
    for key in document.get("keys", []):
        if key.get("kty") == "RSA" and key.get("use", "sig") == "sig":
            numbers = rsa.RSAPublicNumbers(int.from_bytes(b64decode(key["e"]), "big"), int.from_bytes(b64decode(key["n"]), "big"))
            fetched[key.get("kid")] = numbers.public_key()
    keys.clear()
    keys.update(fetched)


def signing_key(kid):
    """The provider's key `kid`, fetching its JWKS when it was never fetched or lacks that key."""
    with jwks_lock:
        if kid not in keys:
            fetch_keys()
        return keys.get(kid)


def id_token_refusal(token):
    """None when `token` is an ID token the OIDC authenticator would accept, else why not."""
    if not settings["issuer"]:
        return "no OIDC authenticator"
    parts = token.split(".")
    if len(parts) != 3:
        return "not a JWT"
    try:
        header, claims = json.loads(b64decode(parts[0])), json.loads(b64decode(parts[1]))
        signature = b64decode(parts[2])
    except ValueError:
        return "not a JWT"
    if not isinstance(header, dict) or not isinstance(claims, dict):
        return "not a JWT"
    # The API server looks at `iss` before anything else, so that a token of another issuer goes
    # to the next authenticator without a key fetch.
    if claims.get("iss") != settings["issuer"]:
        return "another issuer"
    if header.get("alg") != "RS256":
        return "algorithm %s" % header.get("alg")
    try:
        key = signing_key(header.get("kid"))
    except (OSError, ValueError) as error:
        return "the JWKS could not be fetched: %s" % error
    if key is None:
        return "unknown key"
    try:
        key.verify(signature, (parts[0] + "." + parts[1]).encode(), padding.PKCS1v15(), hashes.SHA256())
    except InvalidSignature:
        return "bad signature"
    audience = claims.get("aud")
    if settings["audience"] not in (audience if isinstance(audience, list) else [audience]):
        return "another audience"
    if not isinstance(claims.get("exp"), (int, float)) or time.time() > claims["exp"]:
        return "expired"
    if not claims.get("sub"):
        return "no sub"
    return None


def access_token_refusal(token):
    """None when the provider's userinfo endpoint answers 200 to `token`, else why not."""
    if not settings["userinfo"]:
        return "no userinfo authenticator"
    with record.lock:
        record.stats["userinfoChecks"] += 1
    request = urllib.request.Request(settings["userinfo"], headers={"Authorization": "Bearer " + token})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            answer.read()
            return None if answer.status == 200 else "userinfo %d" % answer.status
    except urllib.error.HTTPError as error:
        return "userinfo %d" % error.code
    except OSError as error:
        return "userinfo unreachable: %s" % error


def authenticate(token):
    """(kind, None) for an accepted token, kind `idToken` or `accessToken`; (None, why) else."""
    refusals = []
    if settings["issuer"]:
        refusal = id_token_refusal(token)
        if refusal is None:
            return "idToken", None
        refusals.append(refusal)
    if settings["userinfo"]:
        refusal = access_token_refusal(token)
        if refusal is None:
            return "accessToken", None
        refusals.append(refusal)
    return None, "; ".join(refusals) or "no authenticator"


# MARK: The API

def namespace(name):
    return {"kind": "Namespace", "apiVersion": "v1",
            "metadata": {"name": name, "uid": "uid-" + name, "resourceVersion": "1", "creationTimestamp": created()},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}


def created():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(settings["started"]))


def namespace_table(names):
    """The server-side printing of namespaces, the columns kube-apiserver prints."""
    age = "%ds" % max(0, int(time.time() - settings["started"]))
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": "1"},
            "columnDefinitions": [
                {"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0},
                {"name": "Status", "type": "string", "format": "", "description": "The status of the namespace", "priority": 0},
                {"name": "Age", "type": "string", "format": "", "description": "CreationTimestamp", "priority": 0}],
            "rows": [{"cells": [name, "Active", age],
                      "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                 "metadata": {"name": name, "uid": "uid-" + name, "resourceVersion": "1", "creationTimestamp": created()}}}
                     for name in names]}


def api_answer(path, accept, port):
    """The status and JSON answer to an authenticated GET of `path`."""
    if path == "/version":
        return 200, {"major": "1", "minor": "20", "gitVersion": "v1.20.2", "gitCommit": "kube_api_server.py",
                     "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.19.8",
                     "compiler": "gc", "platform": "linux/amd64"}
    if path == "/api":
        return 200, {"kind": "APIVersions", "versions": ["v1"],
                     "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:%d" % port}]}
    if path == "/apis":
        return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": []}
    if path == "/api/v1":
        return 200, {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
            {"name": "namespaces", "singularName": "", "namespaced": False, "kind": "Namespace",
             "verbs": ["get", "list"], "shortNames": ["ns"], "storageVersionHash": "Q3oi5N2YM8M="}]}
    names = settings["namespaces"]
    if path == "/api/v1/namespaces":
        if "as=Table" in accept:
            return 200, namespace_table(names)
        return 200, {"kind": "NamespaceList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"},
                     "items": [namespace(name) for name in names]}
    if path.startswith("/api/v1/namespaces/") and path.count("/") == 4:
        name = path.rsplit("/", 1)[1]
        if name in names:
            return 200, namespace_table([name]) if "as=Table" in accept else namespace(name)
        return 404, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                     "message": 'namespaces "%s" not found' % name, "reason": "NotFound",
                     "details": {"name": name, "kind": "namespaces"}, "code": 404}
    return 404, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                 "message": "the server could not find the requested resource", "reason": "NotFound",
                 "details": {}, "code": 404}


class Handler(serving.Handler):
    def do_GET(self):
        path, _, query = self.path.partition("?")
        if record.answer_control(self, path):
            return
        self.handle_api(path, query)

    def do_POST(self):
        self.handle_api(*self.path.partition("?")[::2])

    def handle_api(self, path, query):
        if not isinstance(self.connection, ssl.SSLSocket):
            self.discard_body()
            return self.reply_json(400, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                         "message": "the API is served over HTTPS only", "reason": "BadRequest", "code": 400})
        authorization = self.headers.get("Authorization") or ""
        scheme, _, token = authorization.partition(" ")
        token = token.strip() if scheme.lower() == "bearer" else ""
        entry = {"method": self.command, "path": path, "query": query, "token": fingerprint(token) if token else None,
                 "kind": None, "refusal": None, "userAgent": self.headers.get("User-Agent"), "time": time.time()}
        with record.lock:
            record.stats["requests"] += 1
            record.note_first("tokens", entry["token"])
        kind, refusal = authenticate(token) if token else (None, "no token")
        self.discard_body()
        if kind is None:
            status, answer = 401, UNAUTHORIZED
        elif self.command != "GET":
            status, answer = 405, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                   "message": "the server does not allow this method on the requested resource",
                                   "reason": "MethodNotAllowed", "code": 405}
        else:
            status, answer = api_answer(path, self.headers.get("Accept") or "", self.server.server_address[1])
        entry.update(status=status, kind=kind, refusal=refusal)
        with record.lock:
            if kind is None:
                record.stats["unauthorized"] += 1
            else:
                record.stats["accepted"] += 1
                record.stats["kinds"][kind] += 1
            record.log.append(entry)
        self.reply_json(status, answer)

    def discard_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)



class Server(ThreadingHTTPServer):
    daemon_threads = True
    tls = None

    def finish_request(self, connection, client_address):
        # In the connection's own thread: a client slow to say hello holds up no one else.
        try:
            connection.settimeout(30)
            # A TLS ClientHello starts with the handshake record type, 22; an HTTP request with a letter.
            if connection.recv(1, socket.MSG_PEEK) == b"\x16":
                connection = self.tls.wrap_socket(connection, server_side=True)
            connection.settimeout(None)
        except (OSError, ssl.SSLError):
            # Most often a client that does not trust the CA, which hangs up after the certificate.
            with record.lock:
                record.stats["handshakeFailures"] += 1
            connection.close()
            return
        try:
            super().finish_request(connection, client_address)
        finally:
            # The TLS socket took over the connection: closing the one it wrapped, as the server
            # does next, would leave it open.
            if isinstance(connection, ssl.SSLSocket):
                self.shutdown_request(connection)

    def handle_error(self, request, client_address):
        # A client that hangs up mid-answer is no error of the server's.
        if not isinstance(sys.exc_info()[1], (ConnectionError, ssl.SSLError, TimeoutError)):
            super().handle_error(request, client_address)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", required=True, help="where ca.pem is written")
    parser.add_argument("--issuer", help="the identity provider's issuer, as its ID tokens' iss")
    parser.add_argument("--jwks", help="the identity provider's JWKS URL")
    parser.add_argument("--audience", help="the client id ID tokens must be for")
    parser.add_argument("--userinfo", help="the identity provider's userinfo endpoint, which judges access tokens")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--namespace", action="append", metavar="NAME")
    args = parser.parse_args()
    if bool(args.issuer) != bool(args.jwks) or bool(args.issuer) != bool(args.audience):
        parser.error("--issuer, --jwks and --audience go together")
    settings.update(issuer=args.issuer, jwks=args.jwks, audience=args.audience, userinfo=args.userinfo,
                    namespaces=args.namespace or ["default", "kube-system"], started=time.time())
    server = Server(("127.0.0.1", args.port), Handler)
    server.tls = make_certificates(args.dir)
    serve_until_stdin_closes(server)


if __name__ == "__main__":
    main()
