#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The other end of a desktop notification, on a test's private bus: the real dunst under Xvfb, a
monitor of the bus's notification traffic, a client, and notification servers and peers that
misbehave. NotificationServer.swift and NotificationPeers.swift start them.

usage: notification_peers.py COMMAND --bus ADDRESS [options]   (see --help of each command)

  dunst             Xvfb and dunst (with a configuration of its own) and a monitor of the traffic
  monitor           the traffic of org.freedesktop.Notifications, as JSON lines in a file
  notify            a client: one Notify, then the signals its connection receives
  forge-action      ActionInvoked / NotificationClosed from a connection that owns no name
  hung-server       owns org.freedesktop.Notifications and never answers Notify
  flood-server      answers Notify, then sends the caller thousands of ActionInvoked
  recording-server  answers everything, logs every call, acts and vanishes on request

Every command prints `ready ...` on stdout once it is connected (and owns its name), and ends when
its standard input closes, so a test that dies leaves none behind. Commands that take orders read
them from standard input, one a line, and confirm each on stdout.

What they log are JSON lines, one message each (see `describe`): the Swift side reads them with
NotificationsMessage. Debian's /usr/bin/python3 with python3-gi (Gio's D-Bus).
"""
import argparse
import ctypes
import json
import os
import random
import select
import signal
import subprocess
import sys
import threading
import time

from gi.repository import Gio, GLib

NAME = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"
INTERFACE = "org.freedesktop.Notifications"
NOTIFY_ARGUMENTS = ["app_name", "replaces_id", "app_icon", "summary", "body", "actions", "hints", "expire_timeout"]

SERVER_XML = """
<node>
  <interface name="org.freedesktop.Notifications">
    <method name="GetCapabilities"><arg type="as" direction="out"/></method>
    <method name="Notify">
      <arg type="s" direction="in"/><arg type="u" direction="in"/><arg type="s" direction="in"/>
      <arg type="s" direction="in"/><arg type="s" direction="in"/><arg type="as" direction="in"/>
      <arg type="a{sv}" direction="in"/><arg type="i" direction="in"/><arg type="u" direction="out"/>
    </method>
    <method name="CloseNotification"><arg type="u" direction="in"/></method>
    <method name="GetServerInformation">
      <arg type="s" direction="out"/><arg type="s" direction="out"/><arg type="s" direction="out"/><arg type="s" direction="out"/>
    </method>
    <signal name="NotificationClosed"><arg type="u"/><arg type="u"/></signal>
    <signal name="ActionInvoked"><arg type="u"/><arg type="s"/></signal>
  </interface>
</node>
"""

output_lock = threading.Lock()


def say(line):
    """One line on stdout for the test, whole even when threads print at once."""
    with output_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def plain(value):
    """A GVariant as JSON can hold it; a variant keeps its type beside its value, so a hint's type
    (`y` for urgency, not `i`) is in the log."""
    kind = value.get_type_string()
    if kind == "v":
        inner = value.get_variant()
        return {"type": inner.get_type_string(), "value": plain(inner)}
    if kind.startswith("a{"):
        entries = (value.get_child_value(i) for i in range(value.n_children()))
        return {str(plain(entry.get_child_value(0))): plain(entry.get_child_value(1)) for entry in entries}
    if kind[0] in "a(":
        return [plain(value.get_child_value(i)) for i in range(value.n_children())]
    return value.unpack()


MESSAGE_TYPES = {
    Gio.DBusMessageType.METHOD_CALL: "call",
    Gio.DBusMessageType.METHOD_RETURN: "return",
    Gio.DBusMessageType.ERROR: "error",
    Gio.DBusMessageType.SIGNAL: "signal",
}


def describe(message, member=None):
    """A message as one JSON-able dict: a Notify call's arguments also by name (`notify`)."""
    body = message.get_body()
    arguments = plain(body) if body is not None else []
    entry = {
        "time": time.time(),
        "type": MESSAGE_TYPES.get(message.get_message_type(), "other"),
        "sender": message.get_sender(),
        "destination": message.get_destination(),
        "path": message.get_path(),
        "interface": message.get_interface(),
        "member": member or message.get_member(),
        "serial": message.get_serial(),
        "reply_serial": message.get_reply_serial() or None,
        "signature": body.get_type_string() if body is not None else "()",
        "args": arguments,
    }
    if message.get_message_type() == Gio.DBusMessageType.ERROR:
        entry["error_name"] = message.get_error_name()
    if entry["type"] == "call" and entry["member"] == "Notify" and entry["signature"] == "(susssasa{sv}i)":
        entry["notify"] = dict(zip(NOTIFY_ARGUMENTS, arguments))
    return entry


class JsonLines:
    """Appends one line per entry; each line is one write, so a reader never sees half of one."""

    def __init__(self, path):
        self.descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        self.lock = threading.Lock()

    def write(self, entry):
        with self.lock:
            os.write(self.descriptor, (json.dumps(entry) + "\n").encode())


def connect(address):
    return Gio.DBusConnection.new_for_address_sync(
        address, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, None, None)


def bus_call(connection, method, arguments, reply_type):
    return connection.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", method,
                                arguments, GLib.VariantType(reply_type), Gio.DBusCallFlags.NONE, 5000, None).unpack()


def own(connection, name):
    """Takes `name`, never waiting in its queue: a test's server either is the owner or fails."""
    if bus_call(connection, "RequestName", GLib.Variant("(su)", (name, 4)), "(u)")[0] != 1:
        sys.exit(f"{name} is owned by another connection")


def name_owner(connection, name):
    try:
        return bus_call(connection, "GetNameOwner", GLib.Variant("(s)", (name,)), "(s)")[0]
    except GLib.Error:
        return None


def until_stdin_closes(loop, order=None):
    """Ends `loop` when standard input reaches its end; hands each line to `order` (on the loop's
    thread) before that. Started with a pipe on stdin, a peer ends with the test that started it."""
    def read():
        for line in sys.stdin:
            if order and line.strip():
                GLib.idle_add(lambda text=line.strip(): order(text.split()) and False)
        GLib.idle_add(loop.quit)
    threading.Thread(target=read, daemon=True).start()


def unblock_signals():
    # A test process blocks signals it waits for (SIGTERM among them), and its children inherit
    # the mask: unblocked here, so this program and the daemons it starts can be asked to stop.
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


# ----------------------------------------------------------------------------------------- monitor

MONITOR_RULES = [
    f"type='method_call',interface='{INTERFACE}'",
    f"type='signal',interface='{INTERFACE}'",
    f"type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged',arg0='{NAME}'",
    # Every reply on the bus: which answer a notification call is known only by its serial.
    "type='method_return'",
    "type='error'",
]


def start_monitor(address, log):
    """A connection that sees what the bus routes (`BecomeMonitor`) and logs the calls and signals of
    the notification interface, the replies to those calls, and who owns the name. A monitor never
    sends: every message it is shown is dropped before GDBus could answer it."""
    connection = connect(address)
    me = connection.get_unique_name()
    calls = {}

    def seen(_connection, message, incoming):
        if not incoming or message.get_destination() == me:
            return message
        kind = message.get_message_type()
        if kind == Gio.DBusMessageType.METHOD_CALL:
            calls[(message.get_sender(), message.get_serial())] = message.get_member()
            log.write(describe(message))
        elif kind in (Gio.DBusMessageType.METHOD_RETURN, Gio.DBusMessageType.ERROR):
            member = calls.pop((message.get_destination(), message.get_reply_serial()), None)
            if member:
                log.write(describe(message, member))
        elif kind == Gio.DBusMessageType.SIGNAL:
            log.write(describe(message))
        return None

    connection.add_filter(seen)
    connection.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.Monitoring", "BecomeMonitor",
                         GLib.Variant("(asu)", (MONITOR_RULES, 0)), None, Gio.DBusCallFlags.NONE, 5000, None)
    return connection


def monitor_command(options):
    log = JsonLines(options.log)
    connection = start_monitor(options.bus, log)
    loop = GLib.MainLoop()
    connection.connect("closed", lambda *_: loop.quit())
    say("ready")
    until_stdin_closes(loop)
    loop.run()


# ------------------------------------------------------------------------------------------- dunst

DUNSTRC = """\
# Debian's /etc/xdg/dunst/dunstrc where a test does not care, so dunst behaves as a person's does.
[global]
    monitor = 0
    follow = none
    width = 300
    height = 300
    origin = top-right
    offset = 10x50
    notification_limit = 0
    indicate_hidden = yes
    sort = yes
    font = Monospace 8
    markup = {markup}
    format = "<b>%s</b>\\n%b"
    stack_duplicates = true
    show_indicators = yes
    icon_position = left
    sticky_history = yes
    # Every closed notification stays listed (Debian keeps 20).
    history_length = 0
    # A notification with actions but none called `default` opens dunst's menu through dmenu, and a
    # URL is opened with the browser: nothing outside the test is run.
    dmenu = /bin/false
    browser = /bin/false
    always_run_script = true
    idle_threshold = 0
    ignore_dbusclose = false
    mouse_left_click = close_current
    mouse_middle_click = do_action, close_current
    mouse_right_click = close_all

# How long a low or normal notification that does not say (expire_timeout -1) stays: {timeout} s,
# 0 until closed. A desktop's is 10; tests take 0 unless they test expiry, so that a slow run never
# sees a notification expire while it looks at it.
[urgency_low]
    timeout = {timeout}
[urgency_normal]
    timeout = {timeout}
[urgency_critical]
    timeout = 0

# What dunst made of each notification it took (its id, urgency, desktop entry), as JSON lines.
[received]
    script = {script}
"""

RECEIVED_SCRIPT = """#!/usr/bin/python3
import json, os
entry = {{key[len("DUNST_"):].lower(): value for key, value in os.environ.items() if key.startswith("DUNST_")}}
descriptor = os.open({log!r}, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
os.write(descriptor, (json.dumps(entry) + "\\n").encode())
"""


LAUNCHER = os.getpid()


def die_with_parent():
    # Linux's PR_SET_PDEATHSIG: the daemon is asked to stop when this launcher dies, however it
    # dies. SIGTERM, not SIGKILL: Xvfb then removes its socket and lock file. A launcher that died
    # before the setting took effect sends nothing, so the child checks it still has its parent.
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
    if os.getppid() != LAUNCHER:
        os._exit(1)


class Children:
    """The daemons this launcher started. It is the subreaper of everything below it (dunst's
    scripts run in grandchildren that dunst disowns), so it reaps them all."""

    def __init__(self):
        self.running = {}
        self.exited = {}

    def start(self, name, arguments, **options):
        process = subprocess.Popen(arguments, preexec_fn=die_with_parent, stdin=subprocess.DEVNULL, **options)
        self.running[process.pid] = (name, process)
        return process

    def reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.running:
                name, process = self.running.pop(pid)
                process.returncode = os.waitstatus_to_exitcode(status)
                self.exited[name] = process.returncode

    def stop(self, name, grace=2.0):
        for pid, (known, process) in list(self.running.items()):
            if known != name:
                continue
            process.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + grace
            while pid in self.running and time.monotonic() < deadline:
                time.sleep(0.01)
                self.reap()
            if pid in self.running:
                process.kill()
                while pid in self.running:
                    time.sleep(0.01)
                    self.reap()


def start_xvfb(children, directory):
    """Xvfb on a display it picks itself (`-displayfd`: the first free one, taken atomically with
    its lock file, so tests that start at once never collide); returns `:N` once it accepts
    connections, and its pid."""
    read_end, write_end = os.pipe()
    with open(os.path.join(directory, "xvfb.log"), "wb") as log:
        xvfb = children.start("Xvfb", ["Xvfb", "-displayfd", str(write_end), "-nolisten", "tcp", "-screen", "0", "1280x800x24"],
                       pass_fds=(write_end,), stdout=log, stderr=log)
    os.close(write_end)
    number = b""
    deadline = time.monotonic() + 30
    while not number.endswith(b"\n") and time.monotonic() < deadline:
        ready, _, _ = select.select([read_end], [], [], 0.1)
        if ready:
            chunk = os.read(read_end, 16)
            if not chunk:
                break
            number += chunk
    os.close(read_end)
    if not number.strip().isdigit():
        sys.exit(f"Xvfb did not say its display within 30 s (see {directory}/xvfb.log)")
    return ":" + number.strip().decode(), xvfb.pid


def dunst_command(options):
    directory = os.path.abspath(options.directory)
    home = os.path.join(directory, "home")
    os.makedirs(os.path.join(home, ".config"), exist_ok=True)
    script = os.path.join(directory, "received-script")
    with open(script, "w") as file:
        file.write(RECEIVED_SCRIPT.format(log=os.path.join(directory, "received.jsonl")))
    os.chmod(script, 0o700)
    configuration = os.path.join(directory, "dunstrc")
    with open(configuration, "w") as file:
        file.write(DUNSTRC.format(markup=options.markup, timeout=options.timeout, script=script))

    ctypes.CDLL(None).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER
    children = Children()
    display, xvfb = start_xvfb(children, directory)
    # Nothing of the test's desktop: no Wayland (dunst would prefer it), no settings of the
    # person running the tests (dunst reads only -config, but its libraries look in HOME too).
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("WAYLAND_DISPLAY", "XAUTHORITY", "XDG_CONFIG_DIRS", "XDG_DATA_DIRS")}
    environment.update({"DISPLAY": display, "DBUS_SESSION_BUS_ADDRESS": options.bus, "HOME": home,
                        "XDG_CONFIG_HOME": os.path.join(home, ".config"), "XDG_CACHE_HOME": os.path.join(home, ".cache"),
                        "XDG_DATA_HOME": os.path.join(home, ".local/share")})
    with open(os.path.join(directory, "dunst.log"), "wb") as log:
        dunst = children.start("dunst", ["dunst", "-config", configuration, "-verbosity", "info"],
                               env=environment, stdout=log, stderr=log)

    # The monitor is in place before anyone knows dunst is up: it sees every notification.
    monitor = start_monitor(options.bus, JsonLines(os.path.join(directory, "traffic.jsonl")))
    control = connect(options.bus)
    deadline = time.monotonic() + options.startup_timeout
    owner = None
    while owner is None:
        children.reap()
        if "dunst" in children.exited or "Xvfb" in children.exited:
            children.stop("dunst")
            children.stop("Xvfb")
            sys.exit(f"dunst or Xvfb exited at start-up: {children.exited} (see {directory}/dunst.log, xvfb.log)")
        if time.monotonic() > deadline:
            children.stop("dunst")
            children.stop("Xvfb")
            sys.exit(f"dunst did not own {NAME} within {options.startup_timeout} s")
        candidate = name_owner(control, NAME)
        # The name is ours only if this dunst holds it: another daemon on the bus is an error.
        if candidate is not None:
            pid = bus_call(control, "GetConnectionUnixProcessID", GLib.Variant("(s)", (candidate,)), "(u)")[0]
            if pid != dunst.pid:
                children.stop("dunst")
                children.stop("Xvfb")
                sys.exit(f"{NAME} is owned by process {pid}, not this dunst")
            owner = candidate
        else:
            time.sleep(0.02)

    loop = GLib.MainLoop()

    def watch():
        children.reap()
        for name, status in children.exited.items():
            say(f"exited {name} {status}")
            loop.quit()
            return False
        return True

    GLib.timeout_add(50, watch)
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, number, lambda: loop.quit() or False)
    monitor.connect("closed", lambda *_: loop.quit())
    say(f"ready {display} {owner} {dunst.pid} {xvfb}")
    until_stdin_closes(loop)
    loop.run()
    children.stop("dunst")
    children.stop("Xvfb")
    children.reap()


# -------------------------------------------------------------------------------------------- notify

def notify_command(options):
    """A client as an application is: one connection that calls Notify and receives the signals."""
    connection = connect(options.bus)
    me = connection.get_unique_name()

    def received(_connection, message, incoming):
        # Printed here, on GDBus's thread, in the order the messages arrive: a reply is printed
        # (`reply`) before the signals that came after it, whenever the caller gets to it.
        if not incoming:
            return message
        kind = message.get_message_type()
        if kind == Gio.DBusMessageType.SIGNAL and message.get_interface() == INTERFACE:
            entry = describe(message)
            entry["unicast"] = message.get_destination() == me
            say("signal " + json.dumps(entry))
        elif kind in (Gio.DBusMessageType.METHOD_RETURN, Gio.DBusMessageType.ERROR) and message.get_sender() != "org.freedesktop.DBus":
            say("reply " + json.dumps(describe(message)))
        return message

    connection.add_filter(received)
    # Broadcast signals reach a connection only through a match rule; unicast ones need none.
    connection.signal_subscribe(None, INTERFACE, None, PATH, None, Gio.DBusSignalFlags.NONE, lambda *_: None)
    loop = GLib.MainLoop()
    connection.connect("closed", lambda *_: loop.quit())

    def call(method, arguments, reply_type):
        try:
            return connection.call_sync(NAME, PATH, INTERFACE, method, arguments,
                                        GLib.VariantType(reply_type) if reply_type else None,
                                        Gio.DBusCallFlags.NONE, options.call_timeout, None)
        except GLib.Error as error:
            say("error " + json.dumps({"method": method, "message": error.message}))
            return None

    hints = {}
    for hint in options.hint:
        name, _, text = hint.partition("=")
        hints[name] = GLib.Variant.parse(None, text, None, None)
    actions = [item for pair in options.action for item in pair]

    def notify():
        reply = call("Notify", GLib.Variant("(susssasa{sv}i)", (options.app_name, options.replaces_id, options.app_icon,
                                                                  options.summary, options.body, actions, hints, options.expire_timeout)),
                     "(u)")
        if reply is not None:
            say(f"id {reply.unpack()[0]}")

    def order(words):
        if words[0] == "close":
            if call("CloseNotification", GLib.Variant("(u)", (int(words[1]),)), None) is not None:
                say(f"closed {words[1]}")
        elif words[0] == "capabilities":
            reply = call("GetCapabilities", None, "(as)")
            if reply is not None:
                say("capabilities " + json.dumps(reply.unpack()[0]))
        elif words[0] == "notify":
            notify()

    say(f"ready {me}")
    notify()
    until_stdin_closes(loop, order)
    loop.run()


# -------------------------------------------------------------------------------------- forge-action

def forge_command(options):
    """Signals of the notification interface from a connection that owns no name: what a process
    on the desktop's bus can send to anyone, claiming a notification's action was chosen."""
    connection = connect(options.bus)
    loop = GLib.MainLoop()
    connection.connect("closed", lambda *_: loop.quit())

    def emit(member, arguments):
        # Unicast to the destination, as a real server sends them, and broadcast to every match rule.
        for destination in ([options.destination] if options.destination else []) + [None]:
            connection.emit_signal(destination, PATH, INTERFACE, member, arguments)
        connection.flush_sync(None)

    def order(words):
        if words[0] == "action":
            emit("ActionInvoked", GLib.Variant("(us)", (int(words[1]), words[2] if len(words) > 2 else options.key)))
            say(f"sent action {words[1]}")
        elif words[0] == "closed":
            emit("NotificationClosed", GLib.Variant("(uu)", (int(words[1]), int(words[2]) if len(words) > 2 else 2)))
            say(f"sent closed {words[1]}")

    say(f"ready {connection.get_unique_name()}")
    if options.id is not None:
        order(["action", str(options.id)])
    until_stdin_closes(loop, order)
    loop.run()


# ------------------------------------------------------------------------------------------ servers

class Server:
    """org.freedesktop.Notifications as a test wants it to behave. Every call to it is logged
    first, whatever the method (one it does not know too), with all its arguments."""

    def __init__(self, options, name):
        self.options = options
        self.name = name
        self.connection = connect(options.bus)
        self.log = JsonLines(options.log)
        self.next_id = 1
        self.caller_of = {}
        self.pending = []
        self.loop = GLib.MainLoop()
        me = self.connection.get_unique_name()

        def logged(_connection, message, incoming):
            if incoming and message.get_message_type() == Gio.DBusMessageType.METHOD_CALL and message.get_destination() in (NAME, me):
                self.log.write(describe(message))
            return message

        self.connection.add_filter(logged)
        info = Gio.DBusNodeInfo.new_for_xml(SERVER_XML).lookup_interface(INTERFACE)
        self.connection.register_object(PATH, info, self.called, None, None)
        self.connection.connect("closed", lambda *_: self.loop.quit())
        own(self.connection, NAME)

    def run(self):
        say(f"ready {self.connection.get_unique_name()}")
        until_stdin_closes(self.loop, self.order)
        self.loop.run()

    def issue_id(self, sender, replaces_id):
        if replaces_id and replaces_id in self.caller_of:
            return replaces_id
        number = self.next_id
        self.next_id += 1
        self.caller_of[number] = sender
        return number

    def emit(self, member, arguments, caller):
        destinations = [caller] if caller and not self.options.broadcast else [None]
        for destination in destinations:
            self.connection.emit_signal(destination, PATH, INTERFACE, member, arguments)

    def called(self, _connection, sender, _path, _interface, method, parameters, invocation):
        if method in self.options.hang:
            # Kept, so the call is never answered, not even with an error when it is dropped.
            self.pending.append((sender, parameters, invocation))
        elif method == "Notify":
            invocation.return_value(GLib.Variant("(u)", (self.issue_id(sender, parameters.unpack()[1]),)))
        elif method == "GetCapabilities":
            invocation.return_value(GLib.Variant("(as)", (self.options.capabilities,)))
        elif method == "GetServerInformation":
            invocation.return_value(GLib.Variant("(ssss)", (self.name, "authctl tests", "1.0", "1.2")))
        elif method == "CloseNotification":
            number = parameters.unpack()[0]
            if number in self.caller_of:
                self.emit("NotificationClosed", GLib.Variant("(uu)", (number, 3)), self.caller_of.pop(number))
            invocation.return_value(None)

    def order(self, words):
        if words[0] == "action":
            number = int(words[1])
            self.emit("ActionInvoked", GLib.Variant("(us)", (number, words[2] if len(words) > 2 else "default")), self.caller_of.get(number))
            self.connection.flush_sync(None)
            say(f"sent action {number}")
        elif words[0] == "closed":
            number = int(words[1])
            self.emit("NotificationClosed", GLib.Variant("(uu)", (number, int(words[2]) if len(words) > 2 else 2)),
                      self.caller_of.pop(number, None))
            self.connection.flush_sync(None)
            say(f"sent closed {number}")
        elif words[0] == "answer":
            # The calls kept so far are answered after all, as a server that was only slow does.
            pending, self.pending = self.pending, []
            for sender, parameters, invocation in pending:
                if invocation.get_method_name() == "Notify":
                    invocation.return_value(GLib.Variant("(u)", (self.issue_id(sender, parameters.unpack()[1]),)))
                else:
                    invocation.return_dbus_error("org.freedesktop.DBus.Error.Failed", "answered late")
            self.connection.flush_sync(None)
            say(f"answered {len(pending)}")
        elif words[0] == "exit":
            # Gone as a crashed server is: no reply to what is pending, the name released by the bus.
            say("exiting")
            os._exit(0)


class FloodServer(Server):
    """Answers Notify, then sends its caller `--count` ActionInvoked, for the ids it gave out and
    for random ones, with `default` and random action keys."""

    def called(self, connection, sender, path, interface, method, parameters, invocation):
        if method != "Notify":
            return super().called(connection, sender, path, interface, method, parameters, invocation)
        number = self.issue_id(sender, parameters.unpack()[1])
        if not self.options.before_reply:
            invocation.return_value(GLib.Variant("(u)", (number,)))
        generator = random.Random(self.options.seed)
        given = list(self.caller_of) or [number]
        for index in range(self.options.count):
            target = generator.choice(given) if index % 2 == 0 else generator.randrange(1, 2**32)
            key = "default" if index % 3 else generator.choice(["default", "open", "", "x" * 64])
            self.emit("ActionInvoked", GLib.Variant("(us)", (target, key)), sender)
        if self.options.before_reply:
            invocation.return_value(GLib.Variant("(u)", (number,)))
        self.connection.flush_sync(None)
        say(f"flooded {self.options.count}")


def server_command(options):
    kinds = {"hung-server": (Server, "hung-server"), "flood-server": (FloodServer, "flood-server"),
             "recording-server": (Server, "recording-server")}
    kind, name = kinds[options.command]
    kind(options, name).run()


# -------------------------------------------------------------------------------------------- main

def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name, help_text):
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("--bus", required=True, help="the bus address (a test sandbox's)")
        return sub

    dunst = command("dunst", "Xvfb and dunst on the bus; prints `ready :DISPLAY UNIQUE_NAME DUNST_PID XVFB_PID`")
    dunst.add_argument("--directory", required=True, help="for dunstrc and the logs (traffic.jsonl, received.jsonl, dunst.log)")
    dunst.add_argument("--markup", default="full", choices=["full", "strip", "no"],
                       help="dunst's markup setting: with `no`, GetCapabilities leaves out body-markup")
    dunst.add_argument("--timeout", type=int, default=0, help="seconds a low or normal notification without its own lasts; 0: until closed")
    dunst.add_argument("--startup-timeout", type=float, default=30)

    monitor = command("monitor", "logs the notification traffic on the bus; prints `ready`")
    monitor.add_argument("--log", required=True)

    notify = command("notify", "calls Notify; prints `ready UNIQUE_NAME`, `id N`, `reply JSON` per reply and `signal JSON` per signal received")
    notify.add_argument("--app-name", default="notification-client")
    notify.add_argument("--replaces-id", type=int, default=0)
    notify.add_argument("--app-icon", default="")
    notify.add_argument("--summary", default="A summary")
    notify.add_argument("--body", default="")
    notify.add_argument("--action", nargs=2, action="append", default=[], metavar=("KEY", "LABEL"))
    notify.add_argument("--hint", action="append", default=[], metavar="NAME=GVARIANT", help="e.g. urgency='byte 2'")
    notify.add_argument("--expire-timeout", type=int, default=-1)
    notify.add_argument("--call-timeout", type=int, default=25000, help="milliseconds to wait for an answer")

    forge = command("forge-action", "emits ActionInvoked as a peer that is not the server")
    forge.add_argument("--id", type=int, help="emit ActionInvoked(ID, KEY) at once; `action ID [KEY]` on stdin emits more")
    forge.add_argument("--key", default="default")
    forge.add_argument("--destination", help="also unicast to this name (a unique name or a well-known one)")

    for name, help_text in [("hung-server", "owns the name and never answers Notify (`answer` on stdin does)"),
                            ("flood-server", "answers Notify, then floods the caller with ActionInvoked"),
                            ("recording-server", "answers and logs every call; `action ID [KEY]`, `closed ID [REASON]`, `exit` on stdin")]:
        server = command(name, help_text)
        server.add_argument("--log", required=True, help="every call received, as JSON lines")
        server.add_argument("--capabilities", default="actions,body,body-markup,body-hyperlinks,icon-static,persistence",
                            type=lambda text: [item for item in text.split(",") if item], help="what GetCapabilities answers")
        server.add_argument("--broadcast", action="store_true", help="signals to everyone, not unicast to the notification's caller")
        server.add_argument("--hang", default="Notify" if name == "hung-server" else "", type=lambda text: [item for item in text.split(",") if item],
                            help="methods never answered")
        if name == "flood-server":
            server.add_argument("--count", type=int, default=5000)
            server.add_argument("--seed", type=int, default=1)
            server.add_argument("--before-reply", action="store_true", help="flood before answering Notify")

    options = parser.parse_args()
    unblock_signals()
    {"dunst": dunst_command, "monitor": monitor_command, "notify": notify_command, "forge-action": forge_command}.get(
        options.command, server_command)(options)


if __name__ == "__main__":
    main()
