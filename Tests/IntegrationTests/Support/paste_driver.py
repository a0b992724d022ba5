# SPDX-License-Identifier: Apache-2.0
"""The person at a terminal who pastes addresses into `authctl sign-in`: runs a command on a
pseudo-terminal and, once it asks for a pasted address and the browser stand-in has written the
address it ended on (IDP_RESULT's "callbackURL"), pastes the lines a plan says, in order.

  paste_driver.py PLAN -- COMMAND [ARGUMENT ...]

PLAN is JSON: {"result": PATH, "timeout": SECONDS, "lines": [STEP, ...]}, each STEP one of
  {"edit": {"set": {NAME: VALUE}, "drop": [NAME]}, "expect": TEXT}  the callback address, edited
  {"raw": TEXT, "expect": TEXT}                                    a line of its own
  {"repeat": CHARACTER, "count": N, "expect": TEXT}                 N times one character
After each line it waits until the terminal shows TEXT (when given) before the next. It prints one
JSON object: {"status": exit status, "output": everything the terminal showed, "error"?}.
"""
import json
import os
import pty
import select
import sys
import time
import urllib.parse


def edited(address, edit):
    parts = urllib.parse.urlsplit(address)
    query = [(k, v) for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
             if k not in set(edit.get("drop", [])) and k not in edit.get("set", {})]
    query += list(edit.get("set", {}).items())
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))


def main():
    plan = json.loads(sys.argv[1])
    command = sys.argv[sys.argv.index("--") + 1:]
    deadline = time.monotonic() + plan.get("timeout", 60)
    pid, terminal = pty.fork()
    if pid == 0:
        os.execvp(command[0], command)
    output = bytearray()

    def pump(until=None):
        """Reads what the terminal shows until `until(text)` holds, the child ends, or time is up."""
        while time.monotonic() < deadline:
            if until and until(output.decode("utf-8", "replace")):
                return True
            ready, _, _ = select.select([terminal], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(terminal, 65536)
                except OSError:
                    return False  # the child closed the terminal: it ended
                if not chunk:
                    return False
                output.extend(chunk)
        return False

    def pause(seconds):
        """Keeps reading the terminal for `seconds`, so the command never blocks writing to it."""
        end = time.monotonic() + seconds
        pump(lambda text: time.monotonic() >= end)

    def paste(data):
        """Writes `data` a piece at a time, reading the terminal's echo in between."""
        for start in range(0, len(data), 1024):
            os.write(terminal, data[start:start + 1024])
            pause(0.001)

    outcome = {}
    if not pump(lambda text: "Or paste here" in text):
        outcome["error"] = "no paste prompt"
    else:
        address = None
        while time.monotonic() < deadline and address is None:
            try:
                with open(plan["result"]) as file:
                    address = json.load(file).get("callbackURL")
            except (OSError, ValueError):
                pause(0.05)
        if address is None:
            outcome["error"] = "the browser stand-in wrote no callback address"
        for step in plan["lines"] if address else []:
            if "edit" in step:
                line = edited(address, step["edit"])
            elif "repeat" in step:
                line = step["repeat"] * step["count"]
            else:
                line = step["raw"].replace("{address}", address)
            seen = len(output)
            paste(line.encode() + b"\n")
            expect = step.get("expect")
            if expect and not pump(lambda text: expect in output[seen:].decode("utf-8", "replace")):
                outcome["error"] = "never shown after %r: %r" % (line[:80], expect)
                break
    pump()  # to the end
    try:
        if time.monotonic() >= deadline:
            os.kill(pid, 9)
        _, status = os.waitpid(pid, 0)
        outcome["status"] = os.waitstatus_to_exitcode(status)
    except ChildProcessError:
        outcome["status"] = -1
    outcome["output"] = output.decode("utf-8", "replace")
    print(json.dumps(outcome))


if __name__ == "__main__":
    main()
