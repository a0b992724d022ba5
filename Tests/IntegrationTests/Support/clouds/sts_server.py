#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""AWS STS for the tests: moto's own STS (its server application, in this process) on
127.0.0.1, with what a test needs around it. Every request is recorded (its action, and for
AssumeRoleWithWebIdentity the form it sent); the control endpoints set STS's clock ahead of the
real one (its `Date` header) and make the next AssumeRoleWithWebIdentity answers an error. moto
checks neither the web identity token nor a signature: the test checks the recorded token.

    sts_server.py            serves as serving.py's servers do: `listening PORT`, until stdin closes.
    GET  /_control/requests  the recorded requests, as JSON.
    POST /_control/clock     {"offset": SECONDS}: STS's Date is that far ahead from now on.
    POST /_control/refuse    {"code": CODE, "count": N}: the next N AssumeRoleWithWebIdentity
                             are answered with that error (HTTP 400, STS's ErrorResponse).
    POST /_control/slow      {"seconds": S, "count": N}: the next N AssumeRoleWithWebIdentity
                             are answered S seconds late.
"""
import email.utils
import io
import json
import os
import sys
import threading
import time
import urllib.parse

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # serving.py
from serving import serve_until_stdin_closes
from werkzeug.serving import make_server

moto = DomainDispatcherApplication(create_backend_app)
lock = threading.Lock()
state = {"requests": [], "offset": 0, "refuse": None, "refusals": 0, "slow": 0.0, "slowed": 0}

ERROR = """<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error>
  <RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId>
</ErrorResponse>"""


def respond(start_response, status, body, content_type="application/json"):
    data = body.encode()
    start_response(status, [("Content-Type", content_type), ("Content-Length", str(len(data)))])
    return [data]


def application(environ, start_response):
    path = environ.get("PATH_INFO", "")
    body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    if path.startswith("/_control/"):
        with lock:
            if path == "/_control/requests":
                return respond(start_response, "200 OK", json.dumps(state["requests"]))
            request = json.loads(body or b"{}")
            if path == "/_control/clock":
                state["offset"] = float(request["offset"])
            elif path == "/_control/refuse":
                state["refuse"] = request["code"]
                state["refusals"] = int(request["count"])
            elif path == "/_control/slow":
                state["slow"] = float(request["seconds"])
                state["slowed"] = int(request["count"])
            return respond(start_response, "200 OK", "{}")
    form = {key: values[0] for key, values in urllib.parse.parse_qs(body.decode("utf-8", "replace")).items()}
    query = {key: values[0] for key, values in urllib.parse.parse_qs(environ.get("QUERY_STRING", "")).items()}
    action = form.get("Action") or query.get("Action")
    with lock:
        state["requests"].append({"action": action, "form": form if action == "AssumeRoleWithWebIdentity" else {},
                                  "signed": "HTTP_AUTHORIZATION" in environ})
        offset = state["offset"]
        refuse, delay = None, 0.0
        if action == "AssumeRoleWithWebIdentity" and state["refusals"] > 0:
            state["refusals"] -= 1
            refuse = state["refuse"]
        if action == "AssumeRoleWithWebIdentity" and state["slowed"] > 0:
            state["slowed"] -= 1
            delay = state["slow"]
    if delay:
        time.sleep(delay)
    date = email.utils.formatdate(time.time() + offset, usegmt=True)
    if refuse:
        data = ERROR.format(code=refuse, message="Token is expired or not valid").encode()
        start_response("400 Bad Request", [("Content-Type", "text/xml"), ("Content-Length", str(len(data))), ("Date", date)])
        return [data]
    environ["wsgi.input"] = io.BytesIO(body)

    def dated(status, headers, exc_info=None):
        headers = [(name, value) for name, value in headers if name.lower() != "date"] + [("Date", date)]
        return start_response(status, headers, exc_info)

    return moto(environ, dated)


def main():
    serve_until_stdin_closes(make_server("127.0.0.1", 0, application, threaded=True))


if __name__ == "__main__":
    sys.exit(main())
