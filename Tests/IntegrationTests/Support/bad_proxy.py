# SPDX-License-Identifier: Apache-2.0
"""A proxy that misbehaves as it is told, for authctl's tests of what a proxy can do wrong.

  bad_proxy.py MODE

MODE is one of:
  refuse-502   answers every request `HTTP/1.1 502 Bad Gateway`
  garbage      answers with bytes that are not HTTP
  connect-body answers a CONNECT `200` with a body, then bytes that are not TLS
  hold         reads the request and never answers, holding the connection open
  close        closes every connection as soon as it has read the request

It listens on 127.0.0.1, prints "listening PORT" once it accepts connections, appends each
request's first line to stdout, and ends when its standard input closes.
"""
import socket
import sys
import threading

MODE = sys.argv[1]
held = []


def serve(connection):
    data = b""
    while b"\r\n\r\n" not in data and len(data) < 65536:
        chunk = connection.recv(4096)
        if not chunk:
            break
        data += chunk
    sys.stdout.write("request %s\n" % data.split(b"\r\n", 1)[0].decode("latin-1"))
    sys.stdout.flush()
    if MODE == "refuse-502":
        connection.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    elif MODE == "garbage":
        connection.sendall(b"\x00\x01garbage that is not HTTP\xff\r\n\r\n")
    elif MODE == "connect-body":
        connection.sendall(b"HTTP/1.1 200 Connection established\r\nContent-Length: 12\r\n\r\nhello, world this is not TLS")
    elif MODE == "hold":
        held.append(connection)  # never answered, never closed while the proxy runs
        return
    connection.close()


def main():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print("listening %d" % listener.getsockname()[1], flush=True)
    threading.Thread(target=lambda: (sys.stdin.read(), listener.close(), sys.exit(0)), daemon=True).start()
    while True:
        try:
            connection, _ = listener.accept()
        except OSError:
            break
        threading.Thread(target=serve, args=(connection,), daemon=True).start()


if __name__ == "__main__":
    main()
