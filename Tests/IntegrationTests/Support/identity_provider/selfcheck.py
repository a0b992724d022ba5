# SPDX-License-Identifier: Apache-2.0
"""Proves the test identity provider and its stand-ins by hand, with no authctl: starts the
provider, plays both flows as a client would, and prints each fact it checked with its timing.

  .build/identity-provider-venv/bin/python3 Tests/IntegrationTests/Support/identity_provider/selfcheck.py [--chromium]

Exits 0 when every check held. --chromium also runs the browser flow in headless Chromium.
"""
import base64
import hashlib
import http.server
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from jwcrypto import jwk, jwt

here = os.path.dirname(os.path.abspath(__file__))
BROWSER_CLIENT = "authctl-browser"
DEVICE_CLIENT = "authctl-device"
failures = []
passes = [0]


def check(fact, holds, detail=""):
    print("%s %s%s" % ("ok  " if holds else "FAIL", fact, (": %s" % (detail,)) if detail and not holds else ""))
    if holds:
        passes[0] += 1
    else:
        failures.append(fact)


def call(url, form=None, bearer=None):
    """(status, JSON or text, seconds) of one request."""
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    request = urllib.request.Request(url, data=data, headers={"Accept": "application/json"})
    if bearer:
        request.add_header("Authorization", "Bearer " + bearer)
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            status, body = answer.status, answer.read()
    except urllib.error.HTTPError as error:
        status, body = error.code, error.read()
    seconds = time.monotonic() - started
    try:
        return status, json.loads(body), seconds
    except ValueError:
        return status, body.decode("utf-8", "replace"), seconds


class Provider:
    def __init__(self, *flags):
        self.folder = tempfile.mkdtemp(prefix="idp-selfcheck-")
        started = time.monotonic()
        self.process = subprocess.Popen(
            [sys.executable, os.path.join(here, "identity_provider.py"), "--database-dir", self.folder, *flags],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        self.start_seconds = time.monotonic() - started
        self.port = int(line.split()[1])
        self.base = "http://127.0.0.1:%d" % self.port
        self.issuer = self.base + "/o"

    def stats(self):
        return call(self.base + "/_stats")[1]

    def stop(self):
        self.process.stdin.close()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.folder, ignore_errors=True)


class Loopback:
    """The client's loopback listener: takes one callback, answers it with a page."""

    def __init__(self):
        self.queries = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                owner.queries.append(dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query)))
                body = b"<html><body>Signed in to selfcheck as someone</body></html>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.redirect_uri = "http://127.0.0.1:%d/callback" % self.port
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


def pkce():
    verifier = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def authorization_url(discovery, redirect_uri, challenge, state, nonce, method="S256", client=BROWSER_CLIENT):
    query = {"response_type": "code", "client_id": client, "redirect_uri": redirect_uri,
             "scope": "openid profile email", "state": state, "nonce": nonce}
    if challenge:
        query.update(code_challenge=challenge, code_challenge_method=method)
    return discovery["authorization_endpoint"] + "?" + urllib.parse.urlencode(query)


def run_browser(url, engine="http", **environment):
    result = os.path.join(tempfile.mkdtemp(prefix="idp-browser-"), "result.json")
    env = dict(os.environ, IDP_RESULT=result, IDP_ENGINE=engine, IDP_PYTHON=sys.executable, **environment)
    started = time.monotonic()
    # As a client starts it: no terminal, output thrown away, not waited for (the result file is).
    subprocess.Popen([os.path.join(here, "browser-stand-in"), url], env=env, stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    while not os.path.exists(result) and time.monotonic() - started < 90:
        time.sleep(0.05)
    with open(result) as file:
        outcome = json.load(file)
    shutil.rmtree(os.path.dirname(result), ignore_errors=True)
    return outcome, time.monotonic() - started


def verify_id_token(token, jwks, issuer, nonce=None):
    keys = jwk.JWKSet.from_json(json.dumps(jwks))
    header = json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
    verified = jwt.JWT(jwt=token, key=keys, algs=["RS256"])
    claims = json.loads(verified.claims)
    check("ID token header alg is RS256 with a kid in the JWKS", header.get("alg") == "RS256"
          and any(key.get("kid") == header.get("kid") for key in jwks["keys"]), header)
    check("ID token iss equals discovery's issuer", claims.get("iss") == issuer, claims.get("iss"))
    check("ID token aud holds the client id", BROWSER_CLIENT in ([claims["aud"]] if isinstance(claims["aud"], str) else claims["aud"]))
    if nonce:
        check("ID token nonce equals the one sent", claims.get("nonce") == nonce)
    return header, claims


def browser_flow(provider, discovery, jwks, engine="http", quiet=False):
    loopback = Loopback()
    verifier, challenge = pkce()
    state, nonce = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    result, seconds = run_browser(authorization_url(discovery, loopback.redirect_uri, challenge, state, nonce), engine)
    loopback.close()
    if not quiet:
        print("     browser stand-in (%s) signed in and came back in %.2f s" % (engine, seconds))
    check("%s: the stand-in reached the callback and saw its page" % engine,
          result.get("status") == 200 and "Signed in to selfcheck" in (result.get("body") or ""), result)
    query = loopback.queries[0] if loopback.queries else {}
    check("%s: the callback carries the state sent" % engine, query.get("state") == state, query)
    check("%s: the callback carries iss equal to the issuer (RFC 9207)" % engine, query.get("iss") == provider.issuer, query)
    status, tokens, exchange_seconds = call(discovery["token_endpoint"], {
        "grant_type": "authorization_code", "code": query.get("code", ""), "redirect_uri": loopback.redirect_uri,
        "client_id": BROWSER_CLIENT, "code_verifier": verifier})
    check("%s: the code exchange answers 200 with access, refresh and ID tokens" % engine,
          status == 200 and {"access_token", "refresh_token", "id_token"} <= set(tokens), tokens)
    if not quiet:
        print("     code exchange: %.0f ms" % (exchange_seconds * 1000))
    return tokens, nonce


def main():
    chromium = "--chromium" in sys.argv
    provider = Provider("--access-token-lifetime", "60", "--device-interval", "1")
    print("     provider on port %d, started in %.2f s" % (provider.port, provider.start_seconds))
    try:
        status, discovery, seconds = call(provider.issuer + "/.well-known/openid-configuration")
        print("     discovery: %.0f ms" % (seconds * 1000))
        check("discovery answers 200", status == 200)
        check("discovery's issuer is http://127.0.0.1:PORT/o, no trailing slash", discovery["issuer"] == provider.issuer, discovery["issuer"])
        check("discovery announces authorization_response_iss_parameter_supported",
              discovery.get("authorization_response_iss_parameter_supported") is True)
        check("discovery names no device_authorization_endpoint (DOT leaves it out)", "device_authorization_endpoint" not in discovery)
        check("discovery names no revocation_endpoint (DOT leaves it out)", "revocation_endpoint" not in discovery)
        status, jwks, _ = call(discovery["jwks_uri"])
        check("the JWKS holds one RSA key", status == 200 and len(jwks["keys"]) == 1 and jwks["keys"][0]["kty"] == "RSA", jwks)

        # The code exchange's refusals: a wrong verifier, another redirect URI, a code used twice.
        loopback = Loopback()
        verifier, challenge = pkce()
        result, _ = run_browser(authorization_url(discovery, loopback.redirect_uri, challenge, "s", "n"))
        loopback.close()
        code = loopback.queries[0].get("code", "") if loopback.queries else ""
        exchange = {"grant_type": "authorization_code", "code": code, "redirect_uri": loopback.redirect_uri, "client_id": BROWSER_CLIENT}
        for label, changes, error in (("a wrong code_verifier", {"code_verifier": pkce()[0]}, "invalid_grant"),
                                      ("another redirect_uri port", {"code_verifier": verifier, "redirect_uri": "http://127.0.0.1:1/callback"},
                                       "invalid_request")):
            status, body, _ = call(discovery["token_endpoint"], {**exchange, **changes})
            check("the code exchange with %s is refused: 400 %s" % (label, error), status == 400 and body.get("error") == error, (status, body))
        status, body, _ = call(discovery["token_endpoint"], {**exchange, "code_verifier": verifier})
        check("the code exchange then still works (those refusals did not use the code up)", status == 200, (status, body))
        status, body, _ = call(discovery["token_endpoint"], {**exchange, "code_verifier": verifier})
        check("the same code a second time is refused: 400 invalid_grant", status == 400 and body.get("error") == "invalid_grant", (status, body))

        tokens, nonce = browser_flow(provider, discovery, jwks)
        _, claims = verify_id_token(tokens["id_token"], jwks, provider.issuer, nonce)
        check("ID token claims: sub, email, email_verified, preferred_username, name",
              claims.get("sub") == "sub-ada" and claims.get("email") == "ada@example.org" and claims.get("email_verified") is True
              and claims.get("preferred_username") == "ada" and claims.get("name") == "Ada Lovelace", claims)
        check("token answer: Bearer, expires_in as configured", tokens.get("token_type") == "Bearer" and tokens.get("expires_in") == 60, tokens)

        status, info, seconds = call(discovery["userinfo_endpoint"], bearer=tokens["access_token"])
        print("     userinfo: %.0f ms" % (seconds * 1000))
        check("userinfo answers the claims", status == 200 and info.get("sub") == "sub-ada" and info.get("email") == "ada@example.org", info)

        # Rotation, then the old refresh token again.
        first = tokens["refresh_token"]
        status, rotated, seconds = call(discovery["token_endpoint"], {"grant_type": "refresh_token", "refresh_token": first, "client_id": BROWSER_CLIENT})
        print("     refresh: %.0f ms" % (seconds * 1000))
        check("refresh answers 200 with a new refresh token and a new ID token",
              status == 200 and rotated.get("refresh_token") not in (None, first) and "id_token" in rotated, rotated)
        if "id_token" in rotated:
            renewed = json.loads(jwt.JWT(jwt=rotated["id_token"], key=jwk.JWKSet.from_json(json.dumps(jwks)), algs=["RS256"]).claims)
            check("the refreshed ID token has the same iss, aud and sub, and no nonce",
                  [renewed.get(name) for name in ("iss", "aud", "sub")] == [claims.get(name) for name in ("iss", "aud", "sub")]
                  and "nonce" not in renewed, renewed)
        status, reuse, _ = call(discovery["token_endpoint"], {"grant_type": "refresh_token", "refresh_token": first, "client_id": BROWSER_CLIENT})
        check("the rotated-away refresh token is refused: 400 invalid_grant", status == 400 and reuse.get("error") == "invalid_grant", (status, reuse))
        status, after, _ = call(discovery["token_endpoint"], {"grant_type": "refresh_token", "refresh_token": rotated["refresh_token"], "client_id": BROWSER_CLIENT})
        check("reuse protection: after the reuse, the newest refresh token of the family is refused too",
              status == 400 and after.get("error") == "invalid_grant", (status, after))
        status, _, _ = call(discovery["userinfo_endpoint"], bearer=rotated["access_token"])
        check("reuse protection: the newest access token of the family is refused at userinfo (401)", status == 401, status)

        # Two refreshes with one token at once, a few times over.
        outcomes = []
        for _ in range(5):
            tokens, _ = browser_flow(provider, discovery, jwks, quiet=True)
            answers = []

            def refresh():
                answers.append(call(discovery["token_endpoint"], {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": BROWSER_CLIENT})[:2])

            racers = [threading.Thread(target=refresh) for _ in range(2)]
            for racer in racers:
                racer.start()
            for racer in racers:
                racer.join()
            pairs = {(body["access_token"], body["refresh_token"]) for status, body in answers if status == 200}
            live = [status for pair in pairs for status in [call(discovery["token_endpoint"], {"grant_type": "refresh_token", "refresh_token": pair[1], "client_id": BROWSER_CLIENT})[0]]]
            outcomes.append("%s, distinct token pairs %d, then the issued refresh token answers %s" % (
                sorted("%d %s" % (status, body.get("error", "tokens") if isinstance(body, dict) else body[:200]) for status, body in answers), len(pairs), live))
            check("two concurrent refreshes with one token never give out two different token pairs", len(pairs) <= 1, answers)
        for outcome in outcomes:
            print("     concurrent refresh pair: %s" % outcome)

        # Revocation.
        tokens, _ = browser_flow(provider, discovery, jwks)
        status, body, seconds = call(provider.issuer + "/revoke_token/", {"token": tokens["refresh_token"], "token_type_hint": "refresh_token", "client_id": BROWSER_CLIENT})
        print("     revoke: %.0f ms" % (seconds * 1000))
        check("revocation answers 200", status == 200, (status, body))
        status, body, _ = call(discovery["token_endpoint"], {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": BROWSER_CLIENT})
        check("the revoked refresh token is refused: 400 invalid_grant", status == 400 and body.get("error") == "invalid_grant", (status, body))
        status, _, _ = call(discovery["userinfo_endpoint"], bearer=tokens["access_token"])
        check("revoking the refresh token revokes its access token too (userinfo 401)", status == 401, status)

        # The loopback rules and PKCE.
        verifier, challenge = pkce()
        for redirect, expected in (("http://127.0.0.1:1/callback", True), ("http://127.0.0.1:65535/callback", True),
                                   ("http://localhost:8080/callback", False), ("http://127.0.0.1:8080/other", False),
                                   ("http://[::1]:8080/callback", True)):
            result, _ = run_browser(authorization_url(discovery, redirect, challenge, "s", "n"), IDP_DECISION="ignore")
            check("redirect %s %s" % (redirect, "accepted" if expected else "refused"), bool(result.get("ignored")) == expected, result.get("error"))
        for label, challenge_sent, method, decision in (("without code_challenge", None, "S256", "ignore"),
                                                        ("with code_challenge_method=plain", verifier, "plain", "approve")):
            loopback = Loopback()
            result, _ = run_browser(authorization_url(discovery, loopback.redirect_uri, challenge_sent, "s", "n", method=method), IDP_DECISION=decision)
            loopback.close()
            query = loopback.queries[0] if loopback.queries else {}
            print("     an authorization request %s: callback %s" % (label, query))
            check("an authorization request %s is refused: invalid_request at the callback" % label,
                  query.get("error") == "invalid_request" and "code" not in query, query)

        # Refusal at the consent page.
        loopback = Loopback()
        result, _ = run_browser(authorization_url(discovery, loopback.redirect_uri, challenge, "st", "n"), IDP_DECISION="deny")
        loopback.close()
        query = loopback.queries[0] if loopback.queries else {}
        check("deny: the callback carries error=access_denied and the state", query.get("error") == "access_denied" and query.get("state") == "st", query)
        print("     deny callback's query: %s" % query)

        # A callback changed on its way (a mix-up attack, a provider without iss) and replayed.
        loopback = Loopback()
        result, _ = run_browser(authorization_url(discovery, loopback.redirect_uri, challenge, "st", "n"),
                                IDP_CALLBACK_SET="iss=http://127.0.0.1:1/o&extra=1", IDP_CALLBACK_DROP="state", IDP_CALLBACK_AGAIN="1")
        loopback.close()
        check("IDP_CALLBACK_SET and IDP_CALLBACK_DROP change the callback, IDP_CALLBACK_AGAIN replays it",
              len(loopback.queries) == 2 and loopback.queries[0] == loopback.queries[1] and "state" not in loopback.queries[0]
              and loopback.queries[0].get("iss") == "http://127.0.0.1:1/o" and loopback.queries[0].get("extra") == "1"
              and "code" in loopback.queries[0] and len(result.get("again", [])) == 1, (loopback.queries, result.get("again")))

        # Device flow.
        status, device, seconds = call(provider.issuer + "/device-authorization/", {"client_id": DEVICE_CLIENT, "scope": "openid profile email"})
        print("     device authorization: %.0f ms, answer fields %s" % (seconds * 1000, sorted(device)))
        check("device authorization answers the RFC 8628 fields",
              status == 200 and {"device_code", "user_code", "verification_uri", "expires_in"} <= set(device), device)
        token_form = {"grant_type": "urn:ietf:params:oauth:grant-type:device_code", "device_code": device["device_code"], "client_id": DEVICE_CLIENT}
        status, pending, _ = call(discovery["token_endpoint"], token_form)
        check("a poll before approval: 400 authorization_pending", status == 400 and pending.get("error") == "authorization_pending", (status, pending))
        started = time.monotonic()
        person = subprocess.run([sys.executable, os.path.join(here, "device_stand_in.py"), device["verification_uri"], device["user_code"]],
                                capture_output=True, text=True, env=dict(os.environ, IDP_RESULT=""))
        print("     device stand-in approved in %.2f s" % (time.monotonic() - started))
        check("the device stand-in approved", person.returncode == 0, person.stdout + person.stderr)
        status, tokens, seconds = call(discovery["token_endpoint"], token_form)
        check("the poll after approval answers tokens, without an ID token",
              status == 200 and "access_token" in tokens and "refresh_token" in tokens and "id_token" not in tokens, tokens)
        status, info, _ = call(discovery["userinfo_endpoint"], bearer=tokens.get("access_token"))
        check("device flow: userinfo answers the claims", status == 200 and info.get("email") == "ada@example.org", info)
        status, again, _ = call(discovery["token_endpoint"], token_form)
        print("     the device code sent again after tokens: %d %s" % (status, sorted(again)))

        status, device, _ = call(provider.issuer + "/device-authorization/", {"client_id": DEVICE_CLIENT})
        person = subprocess.run([sys.executable, os.path.join(here, "device_stand_in.py"), device["verification_uri_complete"]],
                                capture_output=True, text=True, env=dict(os.environ, IDP_RESULT="", IDP_DECISION="deny", IDP_USER="grace@example.org"))
        status, denied, _ = call(discovery["token_endpoint"], {**token_form, "device_code": device["device_code"]})
        check("device deny through verification_uri_complete: the poll answers access_denied", denied.get("error") == "access_denied", (status, denied))

        if chromium:
            tokens, nonce = browser_flow(provider, discovery, jwks, engine="chromium")
            verify_id_token(tokens["id_token"], jwks, provider.issuer, nonce)

        stats = provider.stats()
        print("     stats: %s" % json.dumps(stats, sort_keys=True))
        check("stats count refreshes by grant type", stats.get("refresh", 0) >= 4 and stats.get("revoke") == 1, stats)
    finally:
        provider.stop()

    # A grace period: the retired refresh token answers the same pair again within it, and is a reuse after it.
    provider = Provider("--refresh-grace-period", "2")
    try:
        discovery = call(provider.issuer + "/.well-known/openid-configuration")[1]
        tokens, _ = browser_flow(provider, discovery, call(discovery["jwks_uri"])[1], quiet=True)
        form = {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": BROWSER_CLIENT}
        _, first, _ = call(discovery["token_endpoint"], form)
        status, again, _ = call(discovery["token_endpoint"], form)
        check("grace period: the retired refresh token answers the same pair again within it",
              status == 200 and (again.get("access_token"), again.get("refresh_token")) == (first.get("access_token"), first.get("refresh_token")), again)
        time.sleep(2.5)
        status, late, _ = call(discovery["token_endpoint"], form)
        check("grace period: after it, the retired refresh token is refused", status == 400 and late.get("error") == "invalid_grant", late)
        status, _, _ = call(discovery["token_endpoint"], {**form, "refresh_token": first["refresh_token"]})
        check("grace period: after that reuse, the newest refresh token is refused too", status == 400, status)

        # A device code past its lifetime: DOT's poll says expired_token only once the person tried the code.
        request = urllib.request.Request(provider.base + "/_config", data=json.dumps({"DEVICE_CODE_EXPIRE_SECONDS": 1}).encode())
        urllib.request.urlopen(request, timeout=10).close()
        status, device, _ = call(provider.issuer + "/device-authorization/", {"client_id": DEVICE_CLIENT})
        check("/_config: the device code lives as configured", device.get("expires_in") == 1, device)
        form = {"grant_type": "urn:ietf:params:oauth:grant-type:device_code", "device_code": device["device_code"], "client_id": DEVICE_CLIENT}
        time.sleep(1.5)
        status, late, _ = call(discovery["token_endpoint"], form)
        check("an expired device code still polls as authorization_pending", late.get("error") == "authorization_pending", late)
        person = subprocess.run([sys.executable, os.path.join(here, "device_stand_in.py"), device["verification_uri"], device["user_code"]],
                                capture_output=True, text=True, env=dict(os.environ, IDP_RESULT=""))
        check("the verification page refuses an expired code", person.returncode == 1, person.stdout)
        status, late, _ = call(discovery["token_endpoint"], form)
        check("once the person tried it, the poll answers expired_token", late.get("error") == "expired_token", late)
    finally:
        provider.stop()
    print("%d passed, %d failed" % (passes[0], len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
