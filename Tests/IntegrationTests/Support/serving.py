# SPDX-License-Identifier: Apache-2.0
"""How the Python test servers beside this file run: on 127.0.0.1, saying their port, until
the test that started them closes their stdin; how they answer (`Handler`), and what they note of
each request for the test (`Record`)."""
import json
import os
import stat
import sys
import threading
from http.server import BaseHTTPRequestHandler


def serve_until_stdin_closes(server):
    """Prints `listening PORT` once `server` accepts connections (what the Swift side waits
    for), then serves. Started with a pipe on stdin, it ends when the pipe closes: a test run
    that dies leaves no server behind."""
    print("listening %d" % server.server_address[1], flush=True)
    if stat.S_ISFIFO(os.fstat(0).st_mode):
        threading.Thread(target=lambda: (sys.stdin.read(), server.shutdown()), daemon=True).start()
    server.serve_forever()


class Handler(BaseHTTPRequestHandler):
    """The test servers' request handler: HTTP/1.1, as the clients under test speak it (keep-alive,
    chunked uploads), and no access log on stderr, where a test reads the server's own
    diagnostics; what a test reads of the requests is the server's `Record`."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply_json(self, status, value, headers=None):
        body = json.dumps(value).encode()
        self.send_response(status)
        for name, header in (headers or {}).items():
            self.send_header(name, header)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Record:
    """What a test server was asked, for the test to read: counters (`GET /_stats`) and one entry
    per request (`GET /_log`). `lock` guards both; a server passes its own when other state must
    change in the same step as the log."""

    def __init__(self, lock=None, **stats):
        self.lock = lock or threading.Lock()
        self.stats = stats
        self.log = []

    def note_first(self, key, value):
        """Adds `value` to the list `stats[key]` the first time it is seen (the caller holds `lock`)."""
        if value is not None and value not in self.stats[key]:
            self.stats[key].append(value)

    def answer_control(self, handler, path):
        """Answers `GET /_stats` or `GET /_log` on `handler`; False for any other path."""
        if path not in ("/_stats", "/_log"):
            return False
        with self.lock:
            handler.reply_json(200, self.stats if path == "/_stats" else self.log)
        return True
