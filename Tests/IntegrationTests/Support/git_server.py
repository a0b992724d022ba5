#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A git smart-HTTP server for authctl's tests, on 127.0.0.1: the repositories under ROOT,
served by `git http-backend`, to whoever sends HTTP Basic credentials whose password is an
access token the identity provider accepts.

  git_server.py --root DIR --userinfo URL [--port N] [--init-repo NAME]...

Every request but the control ones needs `Authorization: Basic`. The password is sent as a
Bearer token to the provider's userinfo endpoint (URL) at every request, nothing cached, so a
revoked or expired token fails at once: 200 there lets the request through to `git
http-backend` with REMOTE_USER set to the Basic user name (which also enables pushes); 401 there,
or no or malformed credentials, answers `401` with `WWW-Authenticate: Basic realm="git"`, so git
asks its credential helpers. A provider that cannot be reached answers `502`.

`--init-repo NAME` makes the bare repository ROOT/NAME (branch `main`, one commit adding
`README`) before the server listens; it may be given more than once.

  control: GET /_stats (JSON: `requests`, `unauthorized`, `forwarded`, `userinfoChecks`,
           `users` and `passwords` (the first 8 characters of each password) in the order first
           seen), GET /_log (every request: `method`, `path`, `query`, `status`,
           `user`, `password`, `gitProtocol`, `contentLength`, `chunked`, `seconds`)

It prints "listening PORT" on its first line once it accepts connections, and ends when its
standard input (a pipe) closes. Python's standard library only, and the `git` program.
"""
import argparse
import base64
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import ThreadingHTTPServer

# No __pycache__ beside the test target's sources, where SwiftPM would find it.
sys.dont_write_bytecode = True
import serving  # noqa: E402
from serving import serve_until_stdin_closes  # noqa: E402

record = serving.Record(requests=0, unauthorized=0, forwarded=0, userinfoChecks=0, users=[], passwords=[])
settings = {"root": "", "userinfo": "", "git": "git"}

# git's own configuration stays out of the server's repositories and of `git http-backend`.
ISOLATED = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "HOME": os.devnull}


def fingerprint(password):
    # Enough of a token to tell tokens apart in a test, not enough to use it.
    return password[:8]


def token_accepted(token):
    """True when the provider's userinfo answers 200 to `token` as Bearer, False on 401 or 403,
    None when the provider could not be asked."""
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
        self.handle_request()

    def do_POST(self):
        self.handle_request()

    def handle_request(self):
        started = time.monotonic()
        path, _, query = self.path.partition("?")
        if record.answer_control(self, path):
            return
        user, password = self.credentials()
        entry = {"method": self.command, "path": path, "query": query, "user": user,
                 "password": fingerprint(password) if password is not None else None,
                 "gitProtocol": self.headers.get("Git-Protocol"), "contentLength": self.headers.get("Content-Length"),
                 "chunked": "chunked" in (self.headers.get("Transfer-Encoding") or "").lower(), "time": time.time()}
        with record.lock:
            record.stats["requests"] += 1
            record.note_first("users", user)
            record.note_first("passwords", entry["password"])
        accepted = token_accepted(password) if password else False
        if accepted:
            status = self.forward(path, query, user)
            with record.lock:
                record.stats["forwarded"] += 1
        elif accepted is None:
            self.discard_body()
            status = 502
            self.reply_text(502, "the identity provider could not be reached\n")
        else:
            self.discard_body()
            status = 401
            with record.lock:
                record.stats["unauthorized"] += 1
            self.reply_text(401, "authentication required\n", {"WWW-Authenticate": 'Basic realm="git"'})
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

    # MARK: The request body

    def body_chunks(self):
        """The request body, in pieces, whether sent with Content-Length or chunked."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            while True:
                size_line = self.rfile.readline(1024)
                if not size_line:
                    return
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    # Trailer fields, up to the blank line.
                    while self.rfile.readline(65536) not in (b"\r\n", b"\n", b""):
                        pass
                    return
                yield from self.read_exactly(size)
                self.rfile.readline(1024)  # the CRLF after each chunk
        else:
            yield from self.read_exactly(int(self.headers.get("Content-Length") or 0))

    def read_exactly(self, count):
        """`count` bytes of the request, in pieces (fewer when the client hangs up)."""
        while count:
            piece = self.rfile.read(min(count, 65536))
            if not piece:
                return
            count -= len(piece)
            yield piece

    def discard_body(self):
        # A refused request's body is read away so that the connection stays usable; a large one
        # closes the connection instead.
        if int(self.headers.get("Content-Length") or 0) > (1 << 20):
            self.close_connection = True
            return
        for _ in self.body_chunks():
            pass

    # MARK: git http-backend

    def forward(self, path, query, user):
        environment = {key: value for key, value in os.environ.items() if not key.startswith(("GIT_", "HTTP_"))}
        environment.update(ISOLATED)
        environment.update({
            "GIT_PROJECT_ROOT": settings["root"], "GIT_HTTP_EXPORT_ALL": "1",
            "GATEWAY_INTERFACE": "CGI/1.1", "SERVER_PROTOCOL": "HTTP/1.1", "SERVER_SOFTWARE": "git_server.py",
            "REQUEST_METHOD": self.command, "PATH_INFO": path, "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type") or "", "REMOTE_USER": user, "REMOTE_ADDR": self.client_address[0],
            "AUTH_TYPE": "Basic",
        })
        chunked = "chunked" in (self.headers.get("Transfer-Encoding") or "").lower()
        if not chunked and self.headers.get("Content-Length") is not None:
            environment["CONTENT_LENGTH"] = self.headers["Content-Length"]
        # Without CONTENT_LENGTH (a chunked body) git http-backend reads to the end of its input.
        for name, value in self.headers.items():
            if name.lower() not in ("authorization", "content-type", "content-length", "transfer-encoding"):
                environment["HTTP_" + name.upper().replace("-", "_")] = value
        backend = subprocess.Popen([settings["git"], "http-backend"], env=environment,
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        feeder = threading.Thread(target=self.feed, args=(backend.stdin,), daemon=True)
        feeder.start()
        try:
            status, headers = self.read_cgi_head(backend.stdout)
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            while True:
                piece = backend.stdout.read1(65536)
                if not piece:
                    break
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            feeder.join()
        except BaseException:
            # A client gone mid-answer leaves no backend blocked on a full pipe.
            backend.kill()
            raise
        finally:
            backend.stdout.close()
            backend.wait()
        return status

    def feed(self, stdin):
        try:
            for piece in self.body_chunks():
                stdin.write(piece)
        except BrokenPipeError:
            # git http-backend stopped reading (it refused the request): the rest is read away.
            for _ in self.body_chunks():
                pass
        finally:
            try:
                stdin.close()
            except BrokenPipeError:
                pass

    @staticmethod
    def read_cgi_head(stdout):
        status, headers = 200, []
        while True:
            line = stdout.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").rstrip("\r\n").partition(":")
            value = value.strip()
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name.lower() not in ("content-length", "transfer-encoding", "connection"):
                headers.append((name, value))
        return status, headers

    # MARK: Answers

    def reply_text(self, status, text, headers=None):
        body = text.encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", (headers or {}).get("Content-Type", "text/plain; charset=utf-8"))
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)


def init_repository(root, name):
    """Makes the bare repository ROOT/NAME with one commit on `main` that adds README."""
    path = os.path.join(root, name)
    environment = dict(os.environ, **ISOLATED, GIT_AUTHOR_NAME="Test", GIT_AUTHOR_EMAIL="test@example.org",
                       GIT_COMMITTER_NAME="Test", GIT_COMMITTER_EMAIL="test@example.org",
                       GIT_AUTHOR_DATE="2026-01-01T00:00:00Z", GIT_COMMITTER_DATE="2026-01-01T00:00:00Z")

    def git(*arguments, input=None):
        return subprocess.run([settings["git"], "-C", path, *arguments], input=input, env=environment,
                              check=True, capture_output=True).stdout.decode().strip()

    os.makedirs(path, exist_ok=True)
    git("init", "--quiet", "--bare", "--initial-branch=main")
    blob = git("hash-object", "-w", "--stdin", input=b"A repository served by the test git server.\n")
    tree = git("mktree", input=("100644 blob %s\tREADME\n" % blob).encode())
    commit = git("commit-tree", tree, "-m", "First commit")
    git("update-ref", "refs/heads/main", commit)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True, help="the folder of the repositories")
    parser.add_argument("--userinfo", required=True, help="the identity provider's userinfo endpoint")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--init-repo", action="append", default=[], metavar="NAME")
    args = parser.parse_args()
    settings["git"] = shutil.which("git") or "git"
    settings["root"] = os.path.abspath(args.root)
    settings["userinfo"] = args.userinfo
    os.makedirs(settings["root"], exist_ok=True)
    for name in args.init_repo:
        init_repository(settings["root"], name)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    serve_until_stdin_closes(server)


if __name__ == "__main__":
    main()
