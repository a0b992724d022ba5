#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A property-based caller of `authctl serve`, run inside a sandbox (private bus and keyring:
`authctl sandbox -- PYTHON serve_caller.py --authctl AUTHCTL`, or ServePropertyTests).

It starts serve, a token server (token_server.py beside the parent folder) and signs in a local
and a bound service with the real `authctl`, then calls every method and property of serve's
objects with generated arguments, with wrong signatures, unknown members, interfaces and paths,
huge strings and non-UTF-8 bytes, in floods from many connections, and in stateful sequences, and
forges the signals serve listens to. It holds serve to three properties:

- serve never crashes: it still runs and still owns io.github.authctl at the end of every test;
- every call gets a reply or a named D-Bus error within CALL_DEADLINE;
- a refused call changes nothing: `authctl status --json` of every service, the settings file's
  bytes and `secret-tool search --all service SERVICE` are as before.

Examples per test: SERVE_CALLER_EXAMPLES (default 12, CI's budget); derandomized, so a run is the
same everywhere. Exit 0 when every property held, 1 with the failures, 2 when a package is missing.
The last line says how many calls were made.
"""
import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request

try:
    from dbus_fast import Message, MessageFlag, MessageType, Variant
    from dbus_fast.aio import MessageBus
except ImportError as error:
    print(f"serve_caller: the PyPI package dbus-fast is missing ({error}): run .ci/install-python-deps", file=sys.stderr)
    sys.exit(2)
try:
    import hypothesis.configuration
    # Its caches (the constants of the code under test) go to the sandbox's folder, which goes
    # with it, not to .hypothesis in the working tree.
    hypothesis.configuration.set_hypothesis_home_dir(
        os.path.join(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir(), "serve-caller-hypothesis"))
    from hypothesis import HealthCheck, Phase, given, settings, strategies as st
    from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test
except ImportError as error:
    print(f"serve_caller: the PyPI package hypothesis is missing ({error}): run .ci/install-python-deps", file=sys.stderr)
    sys.exit(2)

NAME = "io.github.authctl"
ROOT = "/io/github/authctl/AuthController1"
CONTROLLER = "io.github.authctl.AuthController1"
SESSION = "io.github.authctl.Session1"
PROPERTIES = "org.freedesktop.DBus.Properties"
INTROSPECTABLE = "org.freedesktop.DBus.Introspectable"
PEER = "org.freedesktop.DBus.Peer"
MANAGER = "org.freedesktop.DBus.ObjectManager"
SESSION_PROPERTIES = ["Service", "SignedIn", "User", "Name", "SignedInAt", "Sequence", "Server", "AccessTokenExpiresAt",
                      "RefreshTokenExpiresAt"]
# The longest a call may rightly take: serve's own deadlines in a row (README: the settings lock,
# a keyring call 5 s, the token server 10 s), with room for a loaded CI machine. Past it, a call
# counts as hung.
CALL_DEADLINE = 30.0
AUTHCTL_ERRORS = {"io.github.authctl.Error." + name for name in
                  ["NotSignedIn", "InvalidInput", "Unavailable", "Timeout", "Denied", "Protocol", "SettingsUnsafe", "SettingsIO"]}
# What GDBus answers a call its objects do not take: an unknown path, interface, member or
# property, a read-only property, arguments of another signature.
BUS_REFUSALS = {"org.freedesktop.DBus.Error." + name for name in
                ["UnknownMethod", "UnknownObject", "UnknownInterface", "UnknownProperty", "InvalidArgs", "PropertyReadOnly"]}

LOCAL = "caller.local-1"
REMOTE = "caller.remote_1"
SERVICES = [LOCAL, REMOTE]
LOCAL_ACCOUNTS = {"amy": "Amy A", "zed": "Zed Z"}


def object_path(service):
    """A service's Session1 object: each byte outside [A-Za-z0-9] as _ and two hex digits."""
    return ROOT + "/services/" + "".join(chr(b) if chr(b).isascii() and chr(b).isalnum() else "_%02x" % b
                                         for b in service.encode())


class PropertyFailed(AssertionError):
    pass


class Caller:
    """The connections, serve and the helpers, and what the calls saw."""

    def __init__(self, arguments):
        self.authctl = arguments.authctl
        self.token_server_script = arguments.token_server
        self.loop = asyncio.new_event_loop()
        self.calls = 0
        self.outcomes = {}
        self.slowest = 0.0
        self.serve = None
        self.owner = None
        self.token_server = None
        config = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
        self.settings_file = os.path.join(config, "authctl", "settings.ini")

    def run(self, coroutine):
        return self.loop.run_until_complete(coroutine)

    # Set-up

    def start(self):
        self.bus = self.run(connect())
        # It signs accounts in and out and starts the bus's serve: only on a fresh sandbox's bus
        # and settings, never a person's.
        owner = self.run(self.bus_call("NameHasOwner", "s", [NAME]))
        if os.path.exists(self.settings_file) or owner.body[0]:
            raise PropertyFailed(f"{self.settings_file} exists or {NAME} is owned: run the caller in a fresh "
                                 "`authctl sandbox -- …`")
        self.token_server = subprocess.Popen([sys.executable, self.token_server_script], stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.token_server.stdout.readline()
        if not line.startswith("listening "):
            raise PropertyFailed(f"the token server did not start: {line!r}")
        port = int(line.split()[1])
        body = json.dumps({"accounts": {"alice": "pw"}, "access_lifetime": 86400, "refresh_lifetime": 864000}).encode()
        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/_config", data=body, method="POST"), timeout=30)
        for account, name in LOCAL_ACCOUNTS.items():
            self.authctl_run(LOCAL, "sign-in", account, "--name", name, "--password-stdin", stdin="pw")
        self.authctl_run(REMOTE, "sign-in", "alice", "--server", f"http://127.0.0.1:{port}/oauth/token", "--password-stdin",
                         stdin="pw")
        self.owner = self.run(self.start_serve())

    async def start_serve(self):
        """Starts serve and returns its unique name once the bus says it owns the name."""
        owned = self.loop.create_future()

        def handler(message):
            if (message.message_type == MessageType.SIGNAL and message.member == "NameOwnerChanged"
                    and message.body[0] == NAME and message.body[2] and not owned.done()):
                owned.set_result(message.body[2])

        self.bus.add_message_handler(handler)
        await self.bus_call("AddMatch", "s", [f"type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged',arg0='{NAME}'"])
        self.serve_log = open(os.path.join(os.environ.get("XDG_RUNTIME_DIR", "/tmp"), "serve-caller-serve.log"), "w+")
        self.serve = subprocess.Popen([self.authctl, "serve"], stdin=subprocess.DEVNULL, stdout=self.serve_log, stderr=self.serve_log)
        try:
            return await asyncio.wait_for(owned, 30)
        except asyncio.TimeoutError:
            raise PropertyFailed(f"serve did not own {NAME} within 30 s: {self.serve_output()}")
        finally:
            self.bus.remove_message_handler(handler)

    def serve_output(self):
        self.serve_log.seek(0)
        return self.serve_log.read()[-4000:]

    def authctl_run(self, service, *arguments, stdin=None, check=True):
        run = subprocess.run([self.authctl, "--service", service, *arguments], input=stdin, capture_output=True, text=True,
                             timeout=60)
        if check and run.returncode != 0:
            raise PropertyFailed(f"authctl --service {service} {' '.join(arguments)}: exit {run.returncode}: {run.stderr}")
        return run

    def stop(self):
        if self.serve and self.serve.poll() is None:
            self.serve.terminate()
            self.serve.wait(30)
        if self.token_server:
            self.token_server.stdin.close()
            self.token_server.wait(30)

    async def bus_call(self, member, signature, body):
        reply = await self.bus.call(Message(destination="org.freedesktop.DBus", path="/org/freedesktop/DBus",
                                            interface="org.freedesktop.DBus", member=member, signature=signature, body=body))
        return reply

    # The properties

    async def call(self, message, bus=None):
        """Sends `message` to serve and returns its reply, failing unless a reply or a named
        error comes within CALL_DEADLINE."""
        started = time.monotonic()
        self.calls += 1
        try:
            reply = await asyncio.wait_for((bus or self.bus).call(message), CALL_DEADLINE)
        except asyncio.TimeoutError:
            raise PropertyFailed(f"no answer within {CALL_DEADLINE:.0f} s to {describe(message)}")
        elapsed = time.monotonic() - started
        self.slowest = max(self.slowest, elapsed)
        outcome = reply.error_name if reply.message_type == MessageType.ERROR else "reply"
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        if reply.message_type == MessageType.ERROR:
            if outcome not in AUTHCTL_ERRORS | BUS_REFUSALS:
                raise PropertyFailed(f"{outcome} {reply.body!r} to {describe(message)}")
            text = reply.body[0] if reply.body and isinstance(reply.body[0], str) else ""
            if not text or (outcome in AUTHCTL_ERRORS and "\n" in text):
                raise PropertyFailed(f"{outcome} without a one-line message ({reply.body!r}) to {describe(message)}")
        elif reply.message_type != MessageType.METHOD_RETURN:
            raise PropertyFailed(f"a {reply.message_type} to {describe(message)}")
        return reply

    def alive(self):
        """serve still runs and still owns the name."""
        if self.serve.poll() is not None:
            raise PropertyFailed(f"serve ended (exit {self.serve.returncode}): {self.serve_output()}")
        reply = self.run(self.bus_call("GetNameOwner", "s", [NAME]))
        if reply.message_type == MessageType.ERROR or reply.body[0] != self.owner:
            raise PropertyFailed(f"{NAME} is no longer owned by serve ({self.owner}): {reply.body!r}")

    def objects_unchanged(self):
        """serve exports the objects of the services with settings, not of every name a caller
        made up."""
        reply = self.run(self.call(call_message(ROOT, MANAGER, "GetManagedObjects")))
        if sorted(reply.body[0]) != sorted(object_path(service) for service in SERVICES):
            raise PropertyFailed(f"serve exports {sorted(reply.body[0])}, not the objects of {SERVICES}")

    def state(self):
        """What a refused call must leave as it was."""
        # The reads run side by side: the snapshot is taken after every example.
        environment = dict(os.environ)
        reads = {("status", service): subprocess.Popen([self.authctl, "--service", service, "status", "--json"],
                                                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                       env=environment)
                 for service in SERVICES}
        reads.update({("keyring", service): subprocess.Popen(["secret-tool", "search", "--all", "service", service],
                                                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                            stderr=subprocess.PIPE, env=environment)
                      for service in SERVICES})
        state = {}
        for (kind, service), process in reads.items():
            stdout, stderr = process.communicate(timeout=30)
            state.setdefault(kind, {})[service] = (process.returncode, stdout, stderr)
        with open(self.settings_file, "rb") as file:
            state["settings"] = file.read()
        return state

    def unchanged(self, before, what):
        after = self.state()
        if after != before:
            changed = [key for key in before if before[key] != after[key]]
            raise PropertyFailed(f"{what} changed {', '.join(changed)}:\nbefore {before!r}\nafter  {after!r}")


async def connect():
    # dbus-fast binds a bus to the loop running when it is made.
    return await MessageBus().connect()


def describe(message):
    body = repr(message.body)
    if len(body) > 300:
        body = body[:300] + f"… ({len(body)} characters)"
    return f"{message.path} {message.interface}.{message.member}({message.signature}) {body}"


def call_message(path, interface, member, signature="", body=(), flags=MessageFlag.NONE):
    return Message(destination=NAME, path=path, interface=interface, member=member, signature=signature, body=list(body),
                   flags=flags)


# Strategies

# Any character a D-Bus string may hold (no NUL), BMP and beyond, control characters included.
text = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=40)
huge = st.builds(lambda character, size: character * size, st.sampled_from(["a", "é", "\U0001f511", ".", "/"]),
                 st.integers(4096, 2 << 20))
small_service_names = st.one_of(st.sampled_from(SERVICES + ["io.github.authctl", "", ".", "-", "a" * 256, "caller.nobody", "x/y",
                                                            "bad\nname", "Ω"]), text)
service_names = st.one_of(small_service_names, huge)
element = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_", min_size=1, max_size=12)
paths = st.one_of(
    st.sampled_from(["/", ROOT, ROOT + "/services", object_path(LOCAL), object_path(REMOTE), object_path("caller.nobody"),
                     "/io", "/io/github/authctl", ROOT + "/services/" + "a" * 200, "/org/freedesktop/DBus"]),
    st.lists(element, min_size=1, max_size=8).map(lambda parts: "/" + "/".join(parts)),
    st.lists(element, max_size=3).map(lambda parts: ROOT + "/services" + "".join("/" + part for part in parts)))
interface_names = st.one_of(
    st.sampled_from([CONTROLLER, SESSION, PROPERTIES, INTROSPECTABLE, PEER, MANAGER, "io.github.authctl.AuthController2",
                     "io.github.authctl.Session1x", "org.freedesktop.DBus", "org.freedesktop.Secret.Service"]),
    st.lists(element.filter(lambda part: not part[0].isdigit()), min_size=2, max_size=5).map(".".join))
member_names = st.one_of(
    st.sampled_from(["GetStatus", "ListAccounts", "GetToken", "SignOut", "SignIn", "Get", "GetAll", "Set", "Introspect",
                     "Ping", "GetMachineId", "GetManagedObjects", "LoginStatusChanged", "PropertiesChanged", "getstatus",
                     "Forget", "Register"]),
    element.filter(lambda name: not name[0].isdigit()))

BASIC = {"y": st.integers(0, 255), "b": st.booleans(), "n": st.integers(-(1 << 15), (1 << 15) - 1),
         "q": st.integers(0, (1 << 16) - 1), "i": st.integers(-(1 << 31), (1 << 31) - 1), "u": st.integers(0, (1 << 32) - 1),
         "x": st.integers(-(1 << 63), (1 << 63) - 1), "t": st.integers(0, (1 << 64) - 1),
         "d": st.floats(allow_nan=True, allow_infinity=True), "s": st.one_of(text, small_service_names), "o": paths,
         "g": st.sampled_from(["", "s", "a{sv}", "(su)", "v"])}
# Bytes that are no UTF-8: the wire allows them in an `ay` (a string would get the message dropped by the bus).
not_utf8 = st.one_of(st.binary(max_size=64), st.sampled_from([b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"caller\x00.local",
                                                              b"\xf8\x88\x80\x80\x80"]))


@st.composite
def typed_values(draw, depth=0):
    """A D-Bus type and a value of it."""
    choices = list(BASIC) + (["ay", "as", "a{sv}", "v", "(sv)", "a(su)", "a{ss}"] if depth < 2 else [])
    kind = draw(st.sampled_from(choices))
    if kind in BASIC:
        return kind, draw(BASIC[kind])
    if kind == "ay":
        return kind, draw(not_utf8)
    if kind == "as":
        return kind, draw(st.lists(BASIC["s"], max_size=4))
    if kind == "a{ss}":
        return kind, draw(st.dictionaries(text, text, max_size=4))
    if kind == "a(su)":
        return kind, [list(pair) for pair in draw(st.lists(st.tuples(text, BASIC["u"]), max_size=4))]
    if kind == "v":
        inner, value = draw(typed_values(depth + 1))
        return kind, Variant(inner, value)
    if kind == "(sv)":
        inner, value = draw(typed_values(depth + 1))
        return kind, [draw(text), Variant(inner, value)]
    entries = draw(st.lists(st.tuples(text, typed_values(depth + 1)), max_size=4))
    return kind, {key: Variant(inner, value) for key, (inner, value) in entries}


arguments = st.lists(typed_values(), max_size=4).map(lambda pairs: ("".join(kind for kind, _ in pairs), [v for _, v in pairs]))

# What serve's objects take, and with which signature.
KNOWN = [
    (ROOT, CONTROLLER, "GetStatus", "s"), (ROOT, CONTROLLER, "ListAccounts", "s"), (ROOT, CONTROLLER, "GetToken", "su"),
    (ROOT, CONTROLLER, "SignOut", "s"), (ROOT, MANAGER, "GetManagedObjects", ""), (ROOT, INTROSPECTABLE, "Introspect", ""),
    (ROOT, PEER, "Ping", ""),
    (object_path(LOCAL), PROPERTIES, "Get", "ss"), (object_path(REMOTE), PROPERTIES, "GetAll", "s"),
    (object_path(LOCAL), PROPERTIES, "Set", "ssv"), (object_path(REMOTE), INTROSPECTABLE, "Introspect", ""),
]


def refusals_of_arguments(interface):
    """How a call of a known member with arguments of another signature is refused: InvalidArgs,
    or for the standard interfaces that GDBus answers itself UnknownMethod (it takes their
    methods only with their own signatures, and looks any other up as a method of an interface
    the object does not export)."""
    if interface in (PROPERTIES, INTROSPECTABLE, PEER):
        return {"org.freedesktop.DBus.Error.InvalidArgs", "org.freedesktop.DBus.Error.UnknownMethod"}
    return {"org.freedesktop.DBus.Error.InvalidArgs"}


def signs_out(message):
    return (message.path, message.interface or CONTROLLER, message.member, message.signature) == (ROOT, CONTROLLER, "SignOut", "s")


def read_calls(caller, huge_strings=True):
    """A call that only reads (or is refused), with generated arguments of the right signature."""
    service_names = globals()["service_names"] if huge_strings else small_service_names
    session_paths = st.sampled_from([object_path(LOCAL), object_path(REMOTE)])
    property_names = st.one_of(st.sampled_from(SESSION_PROPERTIES), text, *([huge] if huge_strings else []))
    return st.one_of(
        st.builds(lambda service: call_message(ROOT, CONTROLLER, "GetStatus", "s", [service]), service_names),
        st.builds(lambda service: call_message(ROOT, CONTROLLER, "ListAccounts", "s", [service]), service_names),
        st.builds(lambda service, valid: call_message(ROOT, CONTROLLER, "GetToken", "su", [service, valid]),
                  service_names, BASIC["u"]),
        st.builds(lambda path, interface, name: call_message(path, PROPERTIES, "Get", "ss", [interface, name]),
                  session_paths, st.one_of(st.just(SESSION), interface_names), property_names),
        st.builds(lambda path, interface: call_message(path, PROPERTIES, "GetAll", "s", [interface]),
                  st.one_of(session_paths, paths), st.one_of(st.just(SESSION), interface_names)),
        st.builds(lambda path, interface, name, value: call_message(path, PROPERTIES, "Set", "ssv",
                                                                     [interface, name, Variant(*value)]),
                  st.one_of(session_paths, paths), st.one_of(st.just(SESSION), interface_names), property_names, typed_values()),
        st.builds(lambda path: call_message(path, INTROSPECTABLE, "Introspect"), paths),
        st.builds(lambda path: call_message(path, MANAGER, "GetManagedObjects"), paths),
        st.builds(lambda path: call_message(path, PEER, "Ping"), paths),
        st.builds(lambda path, interface, member, args: call_message(path, interface, member, *args),
                  paths, interface_names, member_names, arguments).filter(lambda message: not signs_out(message)),
        # Without an interface (the wire allows it): the member is looked up on every interface.
        st.builds(lambda path, member, args: call_message(path, None, member, *args),
                  st.one_of(session_paths, paths), member_names, arguments).filter(lambda message: not signs_out(message)),
        st.builds(lambda known, args: call_message(known[0], known[1], known[2], *args),
                  st.sampled_from(KNOWN), arguments.filter(lambda args: args[0] not in ("s", "su", "ss", "ssv", ""))),
    )


# The tests


def settings_for(examples):
    return settings(max_examples=examples, derandomize=True, database=None, deadline=None, print_blob=False,
                    phases=[Phase.explicit, Phase.generate, Phase.shrink],
                    suppress_health_check=list(HealthCheck))


def generated_calls(caller, examples):
    """Each example: a few calls that only read or are refused, one after another; serve lives
    and the state is as at the start."""
    baseline = caller.state()

    @settings_for(examples)
    @given(st.lists(read_calls(caller), min_size=1, max_size=6))
    def test(messages):
        for message in messages:
            reply = caller.run(caller.call(message))
            if message.member == "GetToken" and message.interface == CONTROLLER and reply.message_type == MessageType.METHOD_RETURN:
                if message.body[0] != REMOTE:
                    raise PropertyFailed(f"a token for {message.body[0]!r}: {describe(message)}")
        caller.alive()
        caller.unchanged(baseline, "calls that only read or were refused")
        caller.objects_unchanged()

    test()


def wrongly_typed(known):
    """Arguments for `known` of any signature but its own, with the signed-in service's name
    among them where GetStatus and SignOut would find it."""
    path, interface, member, signature = known

    def named(args):
        return (args[0] + "s", args[1] + [REMOTE]) if member in ("SignOut", "GetStatus") else args

    return arguments.map(named).filter(lambda args: args[0] != signature).map(lambda args: (known, args))


def wrong_signatures(caller, examples):
    """Serve's own methods and the standard ones with arguments of another signature: each is
    refused with InvalidArgs, and SignOut of a signed-in service with wrong arguments signs
    nobody out."""
    baseline = caller.state()

    @settings_for(examples)
    @given(st.lists(st.sampled_from(KNOWN).flatmap(wrongly_typed), min_size=1, max_size=4))
    def test(calls):
        for (path, interface, member, signature), args in calls:
            reply = caller.run(caller.call(call_message(path, interface, member, *args)))
            if reply.error_name not in refusals_of_arguments(interface):
                raise PropertyFailed(f"{reply.error_name or 'a reply'} {reply.body!r} to {member}({args[0]}), not InvalidArgs")
        caller.alive()
        caller.unchanged(baseline, "calls with a wrong signature")

    test()


def floods(caller, examples):
    """Many calls at once from several connections, some abandoned mid-flight (the caller hangs
    up), some sent without wanting a reply: every awaited one is answered in time, and serve
    still answers after."""
    baseline = caller.state()

    @settings_for(max(3, examples // 4))
    @given(st.lists(read_calls(caller, huge_strings=False), min_size=1, max_size=20), st.integers(20, 200), st.integers(1, 8),
           st.booleans(), st.booleans())
    def test(messages, count, connections, abandon, no_reply):
        def nth(index, flags=MessageFlag.NONE):
            return copy(messages[index % len(messages)], flags)

        async def flood():
            buses = [await connect() for _ in range(connections)]
            # dbus-fast drops a connection whose socket is full (EAGAIN is fatal to its writer),
            # so each keeps at most WINDOW calls unanswered: a flood of the bus's pace, not of
            # the client's buffer.
            windows = {id(bus): asyncio.Semaphore(FLOOD_WINDOW) for bus in buses}

            async def windowed(index):
                bus = buses[index % connections]
                async with windows[id(bus)]:
                    return await caller.call(nth(index), bus)

            try:
                if abandon:
                    # Sent, and the connection closed before any answer: serve's caller
                    # watches see the peer vanish mid-call.
                    hangup = await connect()
                    await sent(hangup, [nth(index) for index in range(count)])
                    hangup.disconnect()
                if no_reply:
                    await sent(buses[0], [nth(index, MessageFlag.NO_REPLY_EXPECTED) for index in range(count)])
                await asyncio.gather(*(windowed(index) for index in range(count)))
            finally:
                for bus in buses:
                    bus.disconnect()
        caller.run(flood())
        caller.run(caller.call(call_message(ROOT, CONTROLLER, "GetStatus", "s", [LOCAL])))
        caller.alive()
        caller.unchanged(baseline, "a flood of calls that only read or were refused")

    test()


# Signals serve listens to, forged by a peer: the login signal (well formed for the signed-in
# services, with any status, reason and sequence, or of any other shape), the keyring's.
login_details = st.fixed_dictionaries(
    {"reason": st.sampled_from(["sign-in", "sign-out", "switch", "forget", "expired", "removed", "initial", "other"]),
     "timestamp": BASIC["t"], "sequence": BASIC["t"]},
    optional={"name": text, "previous-user": text}).map(
    lambda details: {key: Variant("t" if key in ("timestamp", "sequence") else "s", value) for key, value in details.items()})
signals = st.one_of(
    st.builds(lambda service, status, user, details: (ROOT, CONTROLLER, "LoginStatusChanged", "sssa{sv}",
                                                      [service, status, user, details]),
              st.sampled_from(SERVICES), st.sampled_from(["signed-out", "signed-in", "signed-sideways"]),
              st.sampled_from(["amy", "zed", "alice", "mallory", ""]), login_details),
    st.builds(lambda path, interface, member, args: (path, interface, member, *args),
              st.one_of(st.just(ROOT), paths), st.just(CONTROLLER), st.sampled_from(["LoginStatusChanged", "Other"]), arguments),
    st.builds(lambda path, interface, member, args: (path, interface, member, *args),
              st.sampled_from(["/org/freedesktop/secrets/collection/login", "/org/freedesktop/secrets", "/"]),
              st.sampled_from(["org.freedesktop.Secret.Collection", "org.freedesktop.Secret.Service"]),
              st.sampled_from(["ItemCreated", "ItemDeleted", "ItemChanged", "CollectionChanged"]), arguments),
    st.builds(lambda args: ("/org/freedesktop/secrets/collection/login", PROPERTIES, "PropertiesChanged",
                            "s" + args[0], ["org.freedesktop.Secret.Collection"] + args[1]), arguments))


def forged_signals(caller, examples):
    """Signals anyone may send, forged: serve may look again, but the state and what its objects
    show stay as they are, and it stays up."""
    baseline = caller.state()
    shown = {service: caller.run(caller.call(call_message(object_path(service), PROPERTIES, "GetAll", "s", [SESSION]))).body[0]
             for service in SERVICES}

    @settings_for(examples)
    @given(st.lists(signals, min_size=1, max_size=8))
    def test(forged):
        async def send():
            for path, interface, member, signature, body in forged:
                await caller.bus.send(Message.new_signal(path, interface, member, signature, body))
            # Answered after serve has taken the signals from its connection.
            await caller.call(call_message(ROOT, CONTROLLER, "GetStatus", "s", [LOCAL]))
        caller.run(send())
        caller.alive()
        caller.unchanged(baseline, "forged signals")
        for service in SERVICES:
            now = caller.run(caller.call(call_message(object_path(service), PROPERTIES, "GetAll", "s", [SESSION]))).body[0]
            if now != shown[service]:
                raise PropertyFailed(f"after forged signals {service}'s object shows {now}, not {shown[service]}")
        caller.objects_unchanged()

    test()


# Calls a flood's connection keeps unanswered at once (see floods).
FLOOD_WINDOW = 32


async def sent(bus, messages):
    """Sends `messages`, none awaiting a reply, at the bus's pace: after each window of them, a
    round trip to the bus, which reads a connection's messages in order."""
    for start in range(0, len(messages), FLOOD_WINDOW):
        await asyncio.gather(*(bus.send(message) for message in messages[start:start + FLOOD_WINDOW]))
        await bus.call(Message(destination="org.freedesktop.DBus", path="/org/freedesktop/DBus", interface="org.freedesktop.DBus",
                               member="GetId"))


def copy(message, flags=MessageFlag.NONE):
    # A message gets its serial when sent: each send needs one of its own.
    return Message(destination=message.destination, path=message.path, interface=message.interface, member=message.member,
                   signature=message.signature, body=message.body, flags=flags)


class Sessions(RuleBasedStateMachine):
    """Sequences of calls that change the state and calls that must not: sign-outs by serve and
    sign-ins by the command line, reads of methods and properties, refused calls. The state may
    change only at an accepted change; between two, it is checked to be as it was."""

    caller = None

    @initialize()
    def begin(self):
        self.signed_in = {LOCAL: "amy", REMOTE: "alice"}
        # Signs back in whatever an earlier sequence signed out, then notes the state.
        for service, user in self.signed_in.items():
            # Exit 1 says nobody is signed in; the document says the same.
            status = json.loads(self.caller.authctl_run(service, "status", "--json", check=False).stdout)
            if not status["signedIn"] or status["user"] != user:
                self.sign_in_again(service, user)
        self.snapshot = self.caller.state()

    def sign_in_again(self, service, user):
        self.caller.authctl_run(service, "sign-in", user, "--password-stdin", stdin="pw")

    def changed(self):
        """An accepted change: what came before it changed nothing, and its state is the new one."""
        self.caller.unchanged(self.snapshot, "calls since the last accepted change")

    def call(self, *args, **kwargs):
        return self.caller.run(self.caller.call(call_message(*args, **kwargs)))

    @rule(service=st.sampled_from(SERVICES))
    def get_status(self, service):
        reply = self.call(ROOT, CONTROLLER, "GetStatus", "s", [service])
        fields = {key: value.value for key, value in reply.body[0].items()}
        expected = self.signed_in[service]
        if fields.get("signedIn") != bool(expected) or fields.get("user", "") != (expected or ""):
            raise PropertyFailed(f"GetStatus({service}) says {fields}, not signed in as {expected!r}")

    @rule(service=st.sampled_from(SERVICES), valid=BASIC["u"])
    def get_token(self, service, valid):
        reply = self.call(ROOT, CONTROLLER, "GetToken", "su", [service, valid])
        expected_error = ("io.github.authctl.Error.InvalidInput" if service == LOCAL else
                          None if self.signed_in[service] else "io.github.authctl.Error.NotSignedIn")
        if reply.error_name != expected_error:
            raise PropertyFailed(f"GetToken({service}, {valid}): {reply.error_name or 'a token'} {reply.body!r}, "
                                 f"expected {expected_error or 'a token'}")
        if reply.message_type == MessageType.METHOD_RETURN:
            # A refresh, were one due, is an accepted change.
            self.snapshot = self.caller.state()

    @rule(service=st.sampled_from(SERVICES))
    def sign_out(self, service):
        self.changed()
        reply = self.call(ROOT, CONTROLLER, "SignOut", "s", [service])
        if reply.message_type != MessageType.METHOD_RETURN:
            raise PropertyFailed(f"SignOut({service}): {reply.error_name} {reply.body!r}")
        self.signed_in[service] = None
        self.snapshot = self.caller.state()

    @rule(service=service_names.filter(lambda service: service not in SERVICES))
    def sign_out_of_nobody(self, service):
        # Nobody is signed in to a service without settings (or to no service at all): the
        # sign-out is answered, and changes nothing.
        reply = self.call(ROOT, CONTROLLER, "SignOut", "s", [service])
        if reply.message_type != MessageType.METHOD_RETURN and reply.error_name != "io.github.authctl.Error.InvalidInput":
            raise PropertyFailed(f"SignOut({service!r}): {reply.error_name} {reply.body!r}")
        self.changed()
        self.caller.objects_unchanged()

    @rule(service=st.sampled_from(SERVICES), count=st.integers(2, 12))
    def sign_outs_among_reads(self, service, count):
        """Several callers sign one service out at once, among reads and token requests of it:
        every call is answered, and the service ends signed out."""
        self.changed()
        messages = [call_message(ROOT, CONTROLLER, "SignOut", "s", [service]) for _ in range(count)]
        messages += [call_message(ROOT, CONTROLLER, "GetStatus", "s", [service]) for _ in range(count)]
        messages += [call_message(ROOT, CONTROLLER, "GetToken", "su", [service, 60]) for _ in range(count)]
        messages += [call_message(object_path(service), PROPERTIES, "GetAll", "s", [SESSION]) for _ in range(count)]

        async def together():
            buses = [await connect() for _ in range(3)]
            try:
                return await asyncio.gather(*(self.caller.call(message, buses[index % 3]) for index, message in enumerate(messages)))
            finally:
                for bus in buses:
                    bus.disconnect()

        for message, reply in zip(messages, self.caller.run(together())):
            refusals = {"SignOut": set(), "GetStatus": set(), "GetAll": set(),
                        "GetToken": {"io.github.authctl.Error.InvalidInput" if service == LOCAL else "io.github.authctl.Error.NotSignedIn"}}
            if reply.message_type != MessageType.METHOD_RETURN and reply.error_name not in refusals[message.member]:
                raise PropertyFailed(f"{message.member}({service}) among sign-outs: {reply.error_name} {reply.body!r}")
        self.signed_in[service] = None
        self.snapshot = self.caller.state()
        self.get_status(service)

    @precondition(lambda self: not all(self.signed_in.values()))
    @rule(data=st.data())
    def sign_in(self, data):
        service = data.draw(st.sampled_from([service for service, user in self.signed_in.items() if not user]))
        user = data.draw(st.sampled_from(sorted(LOCAL_ACCOUNTS))) if service == LOCAL else "alice"
        self.changed()
        self.sign_in_again(service, user)
        self.signed_in[service] = user
        self.snapshot = self.caller.state()

    @rule(service=st.sampled_from(SERVICES), name=st.one_of(st.sampled_from(SESSION_PROPERTIES), text))
    def get_property(self, service, name):
        reply = self.call(object_path(service), PROPERTIES, "Get", "ss", [SESSION, name])
        if name in SESSION_PROPERTIES and reply.message_type != MessageType.METHOD_RETURN:
            raise PropertyFailed(f"Get({service}, {name}): {reply.error_name} {reply.body!r}")
        if name not in SESSION_PROPERTIES and reply.error_name not in BUS_REFUSALS:
            raise PropertyFailed(f"Get({service}, {name!r}) of no such property: {reply.error_name or reply.body!r}")

    @rule(service=st.sampled_from(SERVICES))
    def get_all(self, service):
        reply = self.call(object_path(service), PROPERTIES, "GetAll", "s", [SESSION])
        if set(reply.body[0]) != set(SESSION_PROPERTIES) or reply.body[0]["Service"].value != service:
            raise PropertyFailed(f"GetAll({service}): {reply.body!r}")

    @rule(service=st.sampled_from(SERVICES), name=st.sampled_from(SESSION_PROPERTIES), value=typed_values())
    def set_property(self, service, name, value):
        reply = self.call(object_path(service), PROPERTIES, "Set", "ssv", [SESSION, name, Variant(*value)])
        if reply.error_name not in BUS_REFUSALS:
            raise PropertyFailed(f"Set({service}, {name}) of a read-only property: {reply.error_name or 'accepted'}")

    @rule(path=st.sampled_from([ROOT, object_path(LOCAL), object_path(REMOTE), "/", ROOT + "/services"]))
    def introspect(self, path):
        self.call(path, INTROSPECTABLE, "Introspect")

    @rule()
    def managed_objects(self):
        reply = self.call(ROOT, MANAGER, "GetManagedObjects")
        for service in SERVICES:
            if object_path(service) not in reply.body[0]:
                raise PropertyFailed(f"GetManagedObjects lists no object for {service}: {sorted(reply.body[0])}")

    @rule(service=st.sampled_from(SERVICES))
    def list_accounts(self, service):
        reply = self.call(ROOT, CONTROLLER, "ListAccounts", "s", [service])
        if reply.message_type != MessageType.METHOD_RETURN:
            raise PropertyFailed(f"ListAccounts({service}): {reply.error_name} {reply.body!r}")

    @rule(known=st.sampled_from(KNOWN), args=arguments, service=st.sampled_from(SERVICES))
    def refused(self, known, args, service):
        path, interface, member, signature = known
        if args[0] + "s" == signature:
            return
        reply = self.call(path, interface, member, args[0] + "s", args[1] + [service])
        if reply.error_name not in refusals_of_arguments(interface):
            raise PropertyFailed(f"{member}({args[0]}s): {reply.error_name or 'a reply'}, not InvalidArgs")

    @invariant()
    def serving(self):
        self.caller.alive()

    def teardown(self):
        if hasattr(self, "snapshot"):
            self.changed()


def sequences(caller, examples):
    Sessions.caller = caller
    # A sequence is a dozen steps, some of them sign-ins (Argon2id): a fifth as many examples.
    run_state_machine_as_test(Sessions, settings=settings(settings_for(max(6, examples // 5)), stateful_step_count=12))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--authctl", required=True, help="the authctl binary")
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--token-server", default=os.path.join(os.path.dirname(here), "token_server.py"))
    parser.add_argument("--only", action="append", help="run only this test (repeatable)")
    options = parser.parse_args()
    examples = int(os.environ.get("SERVE_CALLER_EXAMPLES", "12"))
    caller = Caller(options)
    tests = [generated_calls, wrong_signatures, floods, forged_signals, sequences]
    failures = []
    started = time.monotonic()
    try:
        caller.start()
        for test in tests:
            if options.only and test.__name__ not in options.only:
                continue
            test_started, calls_before = time.monotonic(), caller.calls
            try:
                test(caller, examples)
                verdict = "held"
            except Exception:
                failures.append(f"{test.__name__}:\n{traceback.format_exc()}")
                verdict = "FAILED"
            print(f"{test.__name__}: {verdict}, {caller.calls - calls_before} calls, {time.monotonic() - test_started:.1f} s",
                  flush=True)
        caller.alive()
    except Exception:
        failures.append(f"set-up or the end:\n{traceback.format_exc()}")
    finally:
        if failures and caller.serve:
            failures.append("serve's output:\n" + caller.serve_output())
        caller.stop()
    for failure in failures:
        print(failure, file=sys.stderr)
    outcomes = ", ".join(f"{name}: {count}" for name, count in sorted(caller.outcomes.items()))
    print(f"{caller.calls} calls in {time.monotonic() - started:.1f} s with {examples} examples a test; "
          f"slowest answer {caller.slowest:.2f} s; {outcomes}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
