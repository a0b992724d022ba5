#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Google's Security Token Service as the tests need it: an RFC 8693 token exchange on 127.0.0.1
(`POST /v1/token`) that takes a `subject_token` only when it is an ID token of the test identity
provider — signed with a key of its JWKS (fetched at each request), `iss` the issuer, `aud` the
client id, not expired — and answers with an access token, as sts.googleapis.com answers. Every
exchange is recorded (`GET /_log`: the subject token and whether it was accepted).

    google_sts.py --issuer URL --jwks URL --audience CLIENT_ID
"""
import argparse
import json
import sys
import os
import secrets
import time
import urllib.parse
import urllib.request
from http.server import ThreadingHTTPServer

from jwcrypto import jwk, jwt
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # serving.py
from serving import Handler, serve_until_stdin_closes

options = None
log = []


def verified(token):
    """The token's claims when it is a valid ID token of the provider; else why not."""
    with urllib.request.urlopen(options.jwks, timeout=10) as answer:
        keys = jwk.JWKSet.from_json(answer.read())
    try:
        claims = json.loads(jwt.JWT(jwt=token, key=keys, algs=["RS256"]).claims)
    except Exception as error:  # jwcrypto raises several kinds
        return None, "signature: %s" % error
    if claims.get("iss") != options.issuer:
        return None, "issuer %r" % claims.get("iss")
    audience = claims.get("aud")
    if options.audience not in (audience if isinstance(audience, list) else [audience]):
        return None, "audience %r" % audience
    if claims.get("exp", 0) <= time.time():
        return None, "expired"
    return claims, None


class Exchange(Handler):
    def do_GET(self):
        if self.path == "/_log":
            self.reply_json(200, log)
        else:
            self.reply_json(404, {"error": "not_found"})

    def do_POST(self):
        form = {key: values[0] for key, values in
                urllib.parse.parse_qs(self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()).items()}
        if self.path != "/v1/token" or form.get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange":
            self.reply_json(400, {"error": "unsupported_grant_type"})
            return
        claims, why = verified(form.get("subject_token", ""))
        log.append({"subject_token": form.get("subject_token"), "subject_token_type": form.get("subject_token_type"),
                    "audience": form.get("audience"), "accepted": claims is not None, "why": why})
        if claims is None:
            self.reply_json(400, {"error": "invalid_grant", "error_description": "the subject token was refused: %s" % why})
            return
        self.reply_json(200, {"access_token": "ya29." + secrets.token_urlsafe(24),
                              "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
                              "token_type": "Bearer", "expires_in": 3600})


def main():
    global options
    parser = argparse.ArgumentParser()
    parser.add_argument("--issuer", required=True)
    parser.add_argument("--jwks", required=True)
    parser.add_argument("--audience", required=True)
    options = parser.parse_args()
    serve_until_stdin_closes(ThreadingHTTPServer(("127.0.0.1", 0), Exchange))


if __name__ == "__main__":
    main()
