#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A container registry for authctl's tests, on 127.0.0.1: Debian's real `docker-registry`
(distribution 2.8) with token authentication, beside a token service that hands out registry
tokens to whoever sends HTTP Basic credentials whose password is an access token the identity
provider accepts.

  container_registry.py --dir DIR --userinfo URL [--seed NAME:TAG]... [--registry PATH]

The registry speaks plain HTTP: a client must count it as insecure (containers-registries.conf's
`insecure = true`, or skopeo's `--tls-verify=false`), which makes containers/image fall back from
HTTPS to HTTP. Every request without a valid registry token answers `401` with
`WWW-Authenticate: Bearer realm="http://127.0.0.1:TOKEN_PORT/token",service="authctl-test-registry"`.

The token service, per the Docker registry token specification:

  GET /token?service=S&scope=repository:NAME:pull,push[&scope=...][&account=USER]

needs `Authorization: Basic`. The password is sent as a Bearer token to the provider's userinfo
endpoint (URL) at every request, nothing cached: 200 there answers `{"token", "access_token",
"expires_in": 60, "issued_at"}` with an ES256 JWT (`x5c`: the service's self-signed certificate,
which is the registry's `rootcertbundle`) carrying `iss`, `sub` (the Basic user name, any is
taken), `aud` (the service), `exp`, `nbf`, `iat`, `jti` and `access` granting every scope asked.
No credentials (a client without any asks anonymously), malformed ones, or a password the
provider refuses answer `401` with a registry-style error body. A provider that cannot be
reached answers `502`.

`--seed NAME:TAG` pushes a tiny OCI image (one layer holding `/hello.txt`) to the registry
before it says it listens, with a token the service mints for itself (not counted below); it may
be given more than once.

  control: GET /_stats (JSON: `tokenRequests`, `unauthorized`, `issued`, `userinfoChecks`,
           `users` and `passwords` (the first 8 characters of each password) in the order first
           seen), GET /_log (every token request: `time`, `user`, `password`, `account`,
           `service`, `scopes` (the list of `scope` parameters), `status`, `seconds`)
           on the token service's port.

It prints "listening PORT" on its first line, PORT being the REGISTRY's, once both the registry
and the token service accept connections; the token service's port is then in DIR/token-port.
The registry's own output goes to DIR/registry.log. It ends, stopping the registry, when its
standard input (a pipe) closes. Run it with the Python of the identity provider's environment
(for `cryptography`).
"""
import argparse
import base64
import datetime
import gzip
import hashlib
import io
import json
import os
import platform
import signal
import socket
import stat
import subprocess
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from http.server import ThreadingHTTPServer

# No __pycache__ beside the test target's sources, where SwiftPM would find it.
sys.dont_write_bytecode = True

import serving  # noqa: E402
from cryptography import x509  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402

SERVICE = "authctl-test-registry"
ISSUER = "authctl-test-token-service"
TOKEN_LIFETIME = 60
# Seeded images are the same bytes at every run: their digests can be compared across tests.
SEED_TIME = 1767225600  # 2026-01-01T00:00:00Z

record = serving.Record(tokenRequests=0, unauthorized=0, issued=0, userinfoChecks=0, users=[], passwords=[])
settings = {"userinfo": "", "signer": None}


def fingerprint(password):
    # Enough of a token to tell tokens apart in a test, not enough to use it.
    return password[:8]


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Signer:
    """The token service's key and the self-signed certificate the registry trusts it by.
    ES256: distribution's libtrust verifies it, and a P-256 key costs nothing to make."""

    def __init__(self, certificate_path):
        self.key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ISSUER)])
        now = datetime.datetime.now(datetime.timezone.utc)
        certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(self.key.public_key())
                       .serial_number(x509.random_serial_number())
                       .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=2))
                       .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                       .sign(self.key, hashes.SHA256()))
        with open(certificate_path, "wb") as file:
            file.write(certificate.public_bytes(serialization.Encoding.PEM))
        # The registry takes the signing key from the token's own x5c, checked against its
        # rootcertbundle (the same certificate): no key ID format of libtrust's to match.
        self.x5c = [base64.b64encode(certificate.public_bytes(serialization.Encoding.DER)).decode()]

    def mint(self, subject, access):
        now = int(time.time())
        header = {"typ": "JWT", "alg": "ES256", "x5c": self.x5c}
        claims = {"iss": ISSUER, "sub": subject, "aud": SERVICE, "exp": now + TOKEN_LIFETIME, "nbf": now, "iat": now,
                  "jti": uuid.uuid4().hex, "access": access}
        signing_input = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())
        r, s = decode_dss_signature(self.key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        # JWS wants r and s side by side, not the DER sequence `cryptography` makes.
        return signing_input + "." + b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big")), now


def access_for(scopes):
    """The `access` claim granting every scope asked: `TYPE:NAME:ACTION,ACTION` each (NAME may
    hold colons, a registry host's port say, so the type is cut at the first and the actions
    at the last)."""
    access = []
    for scope in scopes:
        kind, _, rest = scope.partition(":")
        name, _, actions = rest.rpartition(":")
        if kind and name:
            access.append({"type": kind, "name": name, "actions": [action for action in actions.split(",") if action]})
    return access


def token_accepted(token):
    """True when the provider's userinfo answers 200 to `token` as Bearer, False on 400, 401 or
    403, None when the provider could not be asked."""
    with record.lock:
        record.stats["userinfoChecks"] += 1
    request = urllib.request.Request(settings["userinfo"], headers={"Authorization": "Bearer " + token})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            answer.read()
            return answer.status == 200
    except urllib.error.HTTPError as error:
        return False if error.code in (400, 401, 403) else None
    except OSError:
        return None


class Handler(serving.Handler):
    def do_GET(self):
        started = time.monotonic()
        path, _, query = self.path.partition("?")
        if record.answer_control(self, path):
            return
        if path != "/token":
            return self.reply_json(404, {"errors": [{"code": "NOT_FOUND", "message": "no such endpoint"}]})
        fields = urllib.parse.parse_qs(query, keep_blank_values=True)
        scopes = fields.get("scope", [])
        user, password = self.credentials()
        entry = {"time": time.time(), "user": user, "password": fingerprint(password) if password is not None else None,
                 "account": (fields.get("account") or [None])[0], "service": (fields.get("service") or [None])[0],
                 "scopes": scopes}
        with record.lock:
            record.stats["tokenRequests"] += 1
            record.note_first("users", user)
            record.note_first("passwords", entry["password"])
        accepted = token_accepted(password) if password else False
        if accepted:
            token, issued_at = settings["signer"].mint(user, access_for(scopes))
            status = 200
            with record.lock:
                record.stats["issued"] += 1
            self.reply_json(200, {"token": token, "access_token": token, "expires_in": TOKEN_LIFETIME,
                                  "issued_at": datetime.datetime.fromtimestamp(issued_at, datetime.timezone.utc)
                                  .strftime("%Y-%m-%dT%H:%M:%SZ")})
        elif accepted is None:
            status = 502
            self.reply_json(502, {"errors": [{"code": "UNAVAILABLE", "message": "the identity provider could not be reached"}]})
        else:
            status = 401
            with record.lock:
                record.stats["unauthorized"] += 1
            # The registry's own error shape, so containers/image quotes the message.
            message = "an access token of the identity provider is required" if password else "credentials are required"
            self.reply_json(401, {"errors": [{"code": "UNAUTHORIZED", "message": message}]},
                            {"WWW-Authenticate": 'Basic realm="%s"' % SERVICE})
        entry["status"] = status
        entry["seconds"] = round(time.monotonic() - started, 4)
        with record.lock:
            record.log.append(entry)

    def credentials(self):
        """The Basic user name and password, or (None, None)."""
        authorization = self.headers.get("Authorization") or ""
        scheme, _, encoded = authorization.partition(" ")
        if scheme.lower() != "basic":
            return None, None
        try:
            user, colon, password = base64.b64decode(encoded.strip(), validate=True).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return None, None
        return (user, password) if colon else (None, None)



# MARK: The registry

def free_port():
    # Only a guess: the port is free now, and the registry binds it a moment later (start_registry
    # tries again when another process took it meanwhile).
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def write_registry_config(folder, port, token_port, certificate):
    # JSON strings are YAML double-quoted scalars: the paths need no escaping of their own.
    config = "\n".join([
        "version: 0.1",
        "log:",
        "  level: info",
        "storage:",
        "  filesystem:",
        "    rootdirectory: %s" % json.dumps(os.path.join(folder, "storage")),
        "  delete:",
        "    enabled: true",
        "  maintenance:",
        "    uploadpurging:",
        "      enabled: false",
        "http:",
        "  addr: %s" % json.dumps("127.0.0.1:%d" % port),
        "  secret: %s" % json.dumps(uuid.uuid4().hex),
        "auth:",
        "  token:",
        "    realm: %s" % json.dumps("http://127.0.0.1:%d/token" % token_port),
        "    service: %s" % json.dumps(SERVICE),
        "    issuer: %s" % json.dumps(ISSUER),
        "    rootcertbundle: %s" % json.dumps(certificate),
        "health:",
        "  storagedriver:",
        "    enabled: false",
        "",
    ])
    path = os.path.join(folder, "registry.yml")
    with open(path, "w") as file:
        file.write(config)
    return path


def die_with_parent():
    # The registry goes when this process goes, however it goes (even SIGKILL): a test run
    # that dies leaves no registry behind. Run between fork and exec, before any thread started.
    import ctypes
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def registry_answers(port):
    """True once the registry answers /v2/ with its token challenge."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/v2/" % port, timeout=2) as answer:
            return answer.status == 200
    except urllib.error.HTTPError as error:
        return error.code == 401 and "Bearer" in (error.headers.get("WWW-Authenticate") or "")
    except OSError:
        return False


def start_registry(executable, folder, token_port, certificate, within=30.0):
    """Starts `docker-registry serve` on a free port; returns (process, port) once it answers."""
    log_path = os.path.join(folder, "registry.log")
    # distribution reads REGISTRY_* variables as configuration (REGISTRY_AUTH_FILE, meant for
    # skopeo, would be its `auth.file`): the registry gets none of the test's environment.
    environment = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": folder}
    deadline = time.monotonic() + within
    for _ in range(5):
        port = free_port()
        config = write_registry_config(folder, port, token_port, certificate)
        with open(log_path, "ab") as output:
            process = subprocess.Popen([executable, "serve", config], stdin=subprocess.DEVNULL, stdout=output,
                                       stderr=subprocess.STDOUT, env=environment, preexec_fn=die_with_parent)
        while time.monotonic() < deadline and process.poll() is None and not registry_answers(port):
            time.sleep(0.02)
        if process.poll() is None and registry_answers(port):
            return process, port
        if process.poll() is None:
            break
        # It ended: most likely another process took the port in between. Once more.
    if process.poll() is None:
        process.kill()
    with open(log_path, errors="replace") as output:
        sys.stderr.write("docker-registry did not start within %d s:\n%s\n" % (within, output.read()[-2000:]))
    sys.exit(1)


# MARK: Seeding

def seed_image(name, tag):
    """A tiny OCI image: (manifest, [(digest, bytes)] of its config and layer)."""
    content = ("A tiny image pushed as %s:%s by container_registry.py.\n" % (name, tag)).encode()
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w", format=tarfile.PAX_FORMAT) as tar:
        member = tarfile.TarInfo("hello.txt")
        member.size, member.mtime, member.mode = len(content), SEED_TIME, 0o644
        tar.addfile(member, io.BytesIO(content))
    layer_tar = archive.getvalue()
    layer = gzip.compress(layer_tar, mtime=0)
    architecture = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    created = datetime.datetime.fromtimestamp(SEED_TIME, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    config = json.dumps({
        "created": created, "architecture": architecture, "os": "linux",
        "config": {"Labels": {"org.example.seeded": "%s:%s" % (name, tag)}},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer_tar).hexdigest()]},
        "history": [{"created": created, "created_by": "container_registry.py --seed"}],
    }, sort_keys=True).encode()

    def descriptor(media_type, data):
        return {"mediaType": media_type, "digest": "sha256:" + hashlib.sha256(data).hexdigest(), "size": len(data)}

    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": descriptor("application/vnd.oci.image.config.v1+json", config),
        "layers": [descriptor("application/vnd.oci.image.layer.v1.tar+gzip", layer)],
    }, sort_keys=True).encode()
    blobs = [("sha256:" + hashlib.sha256(data).hexdigest(), data) for data in (config, layer)]
    return manifest, blobs


def push_seed(port, signer, reference):
    name, _, tag = reference.rpartition(":")
    if not name or not tag or "/" in tag:
        sys.exit("--seed takes NAME:TAG, not %r" % reference)
    manifest, blobs = seed_image(name, tag)
    token, _ = signer.mint("container_registry.py", [{"type": "repository", "name": name, "actions": ["pull", "push"]}])
    base = "http://127.0.0.1:%d" % port

    def send(method, url, data=None, content_type=None):
        request = urllib.request.Request(url if "://" in url else base + url, data=data, method=method,
                                         headers={"Authorization": "Bearer " + token})
        if content_type:
            request.add_header("Content-Type", content_type)
        with urllib.request.urlopen(request, timeout=30) as answer:
            answer.read()
            return answer

    for digest, data in blobs:
        location = send("POST", "/v2/%s/blobs/uploads/" % name).headers["Location"]
        separator = "&" if "?" in location else "?"
        send("PUT", location + separator + "digest=" + urllib.parse.quote(digest), data, "application/octet-stream")
    send("PUT", "/v2/%s/manifests/%s" % (name, tag), manifest, "application/vnd.oci.image.manifest.v1+json")


# MARK: Running

def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", required=True, help="the folder of the registry's storage, configuration and log")
    parser.add_argument("--userinfo", required=True, help="the identity provider's userinfo endpoint")
    parser.add_argument("--seed", action="append", default=[], metavar="NAME:TAG")
    parser.add_argument("--registry", default="/usr/bin/docker-registry", help="distribution's registry program")
    args = parser.parse_args()
    folder = os.path.abspath(args.dir)
    os.makedirs(folder, exist_ok=True)
    settings["userinfo"] = args.userinfo
    certificate = os.path.join(folder, "token-issuer.pem")
    signer = settings["signer"] = Signer(certificate)

    # Bound (so its port is in the registry's realm) but not yet serving: no thread runs while
    # the registry is forked.
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    token_port = server.server_address[1]
    registry, port = start_registry(args.registry, folder, token_port, certificate)

    # SIGTERM (ServerProcess.stop) ends the serving loop like a closed stdin: the registry is stopped below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        for reference in args.seed:
            push_seed(port, signer, reference)
        with open(os.path.join(folder, "token-port.tmp"), "w") as file:
            file.write("%d\n" % token_port)
        os.rename(os.path.join(folder, "token-port.tmp"), os.path.join(folder, "token-port"))
        print("listening %d" % port, flush=True)
        if stat.S_ISFIFO(os.fstat(0).st_mode):
            threading.Thread(target=lambda: (sys.stdin.read(), server.shutdown()), daemon=True).start()
        server.serve_forever()
    finally:
        registry.terminate()
        try:
            registry.wait(timeout=5)
        except subprocess.TimeoutExpired:
            registry.kill()


if __name__ == "__main__":
    main()
