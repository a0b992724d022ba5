"""How the Python test servers beside this file run: on 127.0.0.1, saying their port, until
the test that started them closes their stdin."""
import os
import stat
import sys
import threading


def serve_until_stdin_closes(server):
    """Prints `listening PORT` once `server` accepts connections (what the Swift side waits
    for), then serves. Started with a pipe on stdin, it ends when the pipe closes: a test run
    that dies leaves no server behind."""
    print("listening %d" % server.server_address[1], flush=True)
    if stat.S_ISFIFO(os.fstat(0).st_mode):
        threading.Thread(target=lambda: (sys.stdin.read(), server.shutdown()), daemon=True).start()
    server.serve_forever()
