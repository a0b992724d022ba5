#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A token server for authctl's tests and demo, on 127.0.0.1: both protocols authctl speaks
(the README, "Remote accounts: a token server"), with knobs for what a test needs a server to do,
and a log of every request.

  oauth2:  POST /oauth/token (password and refresh_token grants), POST /oauth/revoke (RFC 7009)
  json:    POST /api/login, /api/register, /api/refresh_tokens (refresh token as Bearer)
  resource: GET /me (200 with a valid access token as Bearer, else 401)
  control: POST /_config (JSON, merged into the configuration), GET /_log, GET /_accepts?token=T,
           GET /_live (the refresh tokens it would still accept)

It prints "listening PORT" on its first line once it accepts connections. Python's standard
library only (Debian's python3), so nothing is built before a test can start it.
"""
import base64
import email.utils
import json
import socket
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import ThreadingHTTPServer

# No __pycache__ beside the test target's sources, where SwiftPM would find it.
sys.dont_write_bytecode = True
import serving  # noqa: E402
from serving import serve_until_stdin_closes  # noqa: E402

lock = threading.Lock()
config = {
    "accounts": {},            # login -> password
    "access_lifetime": 300,    # seconds; None: no expiry in the answer
    "refresh_lifetime": 3600,  # seconds; None: no expiry in the answer (never expires)
    "rotate": True,            # a refresh issues a new refresh token and retires the old one
    "issue_refresh": True,     # answers carry a refresh token at all (RFC 6749 allows none)
    "jwt": False,              # access tokens are JWTs with exp (and no expires_in)
    "clock_offset": 0,         # the server's clock minus the real one, in seconds
    "delay": 0.0,              # seconds before each answer
    "refresh_delay": 0.0,      # seconds before each refresh answer
    "scripted": [],            # answers for the next requests, used up in order (see answer_scripted)
}
# A refresh whose answer is slow on its way back: the refresh token is rotated (the old one
# retired, the new one live) at once, and the answer is sent this many seconds later.
config["refresh_answer_delay"] = 0.0
# The log shares the lock of the tokens and the configuration: a request is logged in the same
# step as it takes its scripted answer.
record = serving.Record(lock)
access_tokens = {}   # token -> expiry (server clock, seconds) or None
refresh_tokens = {}  # token -> (account, expiry or None)
# Every refresh token ever issued here. A refresh presenting another is logged as "stray": the
# port may have served another test's server before, whose leftover client knocks here.
issued_refresh_tokens = set()
serial = [0]


def server_now():
    return time.time() + config["clock_offset"]


class Handler(serving.Handler):
    def do_GET(self):
        path, _, query = self.path.partition("?")
        if record.answer_control(self, path):
            return
        if path == "/_accepts":
            token = urllib.parse.parse_qs(query).get("token", [""])[0]
            with lock:
                expiry = access_tokens.get(token, -1)
            return self.reply(200, {"accepted": expiry is None or (expiry != -1 and expiry > server_now())})
        if path == "/_live":
            with lock:
                now = server_now()
                return self.reply(200, sorted(token for token, (_, expiry) in refresh_tokens.items() if expiry is None or expiry > now))
        if path == "/me":
            # A resource server that trusts this server's access tokens (the README's curl example).
            authorization = self.headers.get("Authorization") or ""
            with lock:
                expiry = access_tokens.get(authorization[len("Bearer "):], -1) if authorization.startswith("Bearer ") else -1
            if expiry is None or (expiry != -1 and expiry > server_now()):
                return self.reply(200, {"authorized": True})
            return self.reply(401, {"code": 401, "message": "invalid access token"})
        self.reply(404, {"code": 404, "message": "no such endpoint"})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/_config":
            with lock:
                config.update(json.loads(body))
                if config.pop("revoke_all", False):
                    refresh_tokens.clear()
            return self.reply(200, config)
        fields = self.fields(body)
        authorization = self.headers.get("Authorization")
        endpoint = {"/oauth/token": "refresh" if fields.get("grant_type") == "refresh_token" else "login",
                    "/oauth/revoke": "revoke", "/api/login": "login", "/api/register": "register",
                    "/api/refresh_tokens": "refresh"}.get(self.path, self.path)
        if endpoint == "refresh":
            presented = authorization[len("Bearer "):] if self.path.startswith("/api/") and authorization else fields.get("refresh_token")
            with lock:
                if presented not in issued_refresh_tokens:
                    endpoint = "stray refresh"
        with lock:
            record.log.append({"endpoint": endpoint, "path": self.path, "fields": fields, "authorization": authorization, "time": time.time(),
                        "headers": {k.lower(): v for k, v in self.headers.items()}})
            scripted = config["scripted"].pop(0) if config["scripted"] else None
            delay = config["delay"] + (config["refresh_delay"] if endpoint == "refresh" else 0)
        if delay:
            time.sleep(delay)
        if scripted is not None:
            return self.answer_scripted(scripted)
        json_api = self.path.startswith("/api/")
        if endpoint in ("login", "register"):
            return self.sign_in(fields, json_api, endpoint == "register")
        if endpoint in ("refresh", "stray refresh"):
            token = authorization[len("Bearer "):] if json_api and authorization else fields.get("refresh_token")
            return self.refresh(token, json_api)
        if endpoint == "revoke":
            with lock:
                refresh_tokens.pop(fields.get("token"), None)
            return self.reply(200, None)
        self.reply(404, {"code": 404, "message": "no such endpoint"})

    # -- endpoints

    def sign_in(self, fields, json_api, register):
        account = fields.get("login" if json_api else "username", "")
        password = fields.get("password", "")
        with lock:
            if register:
                if account in config["accounts"]:
                    return self.reply(409, {"code": 409, "message": "account exists"})
                config["accounts"][account] = password
            known = config["accounts"].get(account)
        if known is None or known != password:
            if json_api:
                return self.reply(401, {"code": 401, "message": "wrong login or password"})
            return self.reply(400, {"error": "invalid_grant", "error_description": "Invalid user credentials"})
        self.issue(account, json_api, previous=None)

    def refresh(self, token, json_api):
        with lock:
            entry = refresh_tokens.get(token)
            valid = entry is not None and (entry[1] is None or entry[1] > server_now())
        if not valid:
            if json_api:
                return self.reply(401, {"code": 401, "message": "refresh token refused"})
            return self.reply(400, {"error": "invalid_grant", "error_description": "Token is not active"})
        self.issue(entry[0], json_api, previous=token)

    def issue(self, account, json_api, previous):
        now = server_now()
        with lock:
            serial[0] += 1
            number = serial[0]
            access_lifetime, refresh_lifetime = config["access_lifetime"], config["refresh_lifetime"]
            rotate = config["issue_refresh"] and (config["rotate"] or previous is None)
            access_expiry = None if access_lifetime is None else now + access_lifetime
            access = "access-%d-%s" % (number, uuid.uuid4().hex[:8])
            if config["jwt"] and access_expiry is not None:
                payload = base64.urlsafe_b64encode(json.dumps({"sub": account, "exp": int(access_expiry)}).encode()).rstrip(b"=")
                access = "eyJhbGciOiJub25lIn0.%s.sig%d" % (payload.decode(), number)
            access_tokens[access] = access_expiry
            refresh = None
            refresh_expiry = None if refresh_lifetime is None else now + refresh_lifetime
            if rotate:
                refresh = "refresh-%d-%s" % (number, uuid.uuid4().hex[:8])
                refresh_tokens.pop(previous, None)
                refresh_tokens[refresh] = (account, refresh_expiry)
                issued_refresh_tokens.add(refresh)
        if json_api:
            answer = {"accessToken": access, "user": {"login": account}}
            if access_expiry is not None:
                answer["accessTokenExpire"] = int(access_expiry * 1000)
            if refresh:
                answer["refreshToken"] = refresh
                if refresh_expiry is not None:
                    answer["refreshTokenExpire"] = int(refresh_expiry * 1000)
        else:
            answer = {"access_token": access, "token_type": "Bearer"}
            if access_lifetime is not None and not config["jwt"]:
                answer["expires_in"] = access_lifetime
            if refresh:
                answer["refresh_token"] = refresh
                if refresh_lifetime is not None:
                    answer["refresh_expires_in"] = refresh_lifetime
        with lock:
            answer_delay = config["refresh_answer_delay"] if previous is not None else 0
        if answer_delay:
            time.sleep(answer_delay)
        self.reply(200, answer)

    # -- answers

    def answer_scripted(self, scripted):
        """{"status", "body", "headers"} as given; {"drop": true} closes without an answer;
        {"oversized": N} a 200 with N bytes of JSON-ish padding; {"slow": S} stalls S seconds."""
        if scripted.get("drop"):
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if "oversized" in scripted:
            body = b'{"pad":"' + b"x" * scripted["oversized"] + b'"}'
            return self.send_raw(200, body, {"Content-Type": "application/json"})
        if "slow" in scripted:
            time.sleep(scripted["slow"])
        body = scripted.get("body", "")
        self.send_raw(scripted.get("status", 200), body.encode() if isinstance(body, str) else json.dumps(body).encode(),
                      scripted.get("headers", {}))

    def reply(self, status, value):
        body = b"" if value is None else json.dumps(value).encode()
        self.send_raw(status, body, {"Content-Type": "application/json"})

    def send_raw(self, status, body, headers):
        self.send_response_only(status)
        self.send_header("Date", email.utils.formatdate(server_now(), usegmt=True))
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    @staticmethod
    def fields(body):
        try:
            value = json.loads(body)
            if isinstance(value, dict):
                return {k: v for k, v in value.items() if isinstance(v, str)}
        except ValueError:
            pass
        return {k: v[0] for k, v in urllib.parse.parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).items()}


def main():
    args = sys.argv[1:]
    tls = None
    if args[:1] == ["--tls"]:  # --tls CERT KEY: HTTPS with that (untrusted) certificate
        tls, args = (args[1], args[2]), args[3:]
    server = ThreadingHTTPServer(("127.0.0.1", int(args[0]) if args else 0), Handler)
    if tls:
        import ssl
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    server.daemon_threads = True
    serve_until_stdin_closes(server)


if __name__ == "__main__":
    main()
