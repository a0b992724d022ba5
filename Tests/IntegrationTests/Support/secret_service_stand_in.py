#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A Secret Service that does not know a caller at first, as gnome-keyring sometimes does not.

usage: secret_service_stand_in.py BUS_ADDRESS REFUSALS [METHOD [MESSAGE]]

gnome-keyring registers each new caller on its main loop, and now and then a caller's first
call is handled before that: it answers `SearchItems` with `UnknownMethod` ("Method SearchItems
is not implemented on interface org.freedesktop.Secret.Service"). This stand-in answers the first
REFUSALS calls of METHOD (`SearchItems` unless given; `OpenSession` too) of every caller so, and
the later ones as a keyring with one unlocked item per search would. It owns
org.freedesktop.secrets on the bus at BUS_ADDRESS, prints `ready`, then one line per call of
METHOD: `METHOD SENDER refused` or `METHOD SENDER answered`. It ends when the bus goes away.
With MESSAGE, that is the refusal's text instead of gnome-keyring's.

With METHOD `CreateItem` and no refusals, the keyring starts empty and keeps the one item a
`CreateItem` makes (its attributes and secret), but lists it at another path than the one its
`CreateItem` answered, as KWallet once did on a loaded machine; it prints `CreateItem SENDER`.

Debian's /usr/bin/python3 with python3-gi (Gio's D-Bus), which the README's listener needs too.
"""
import sys

from gi.repository import Gio, GLib

address, refusals = sys.argv[1], int(sys.argv[2])
declined_method = sys.argv[3] if len(sys.argv) > 3 else "SearchItems"
refusal_text = sys.argv[4] if len(sys.argv) > 4 else None

INTERFACES = Gio.DBusNodeInfo.new_for_xml("""
<node>
  <interface name="org.freedesktop.Secret.Service">
    <method name="SearchItems">
      <arg type="a{ss}" direction="in"/><arg type="ao" direction="out"/><arg type="ao" direction="out"/>
    </method>
    <method name="OpenSession">
      <arg type="s" direction="in"/><arg type="v" direction="in"/><arg type="v" direction="out"/><arg type="o" direction="out"/>
    </method>
    <method name="ReadAlias"><arg type="s" direction="in"/><arg type="o" direction="out"/></method>
  </interface>
  <interface name="org.freedesktop.Secret.Collection">
    <method name="CreateItem">
      <arg type="a{sv}" direction="in"/><arg type="(oayays)" direction="in"/><arg type="b" direction="in"/>
      <arg type="o" direction="out"/><arg type="o" direction="out"/>
    </method>
    <property name="Locked" type="b" access="read"/>
  </interface>
  <interface name="org.freedesktop.Secret.Item">
    <method name="GetSecret"><arg type="o" direction="in"/><arg type="(oayays)" direction="out"/></method>
    <method name="Delete"><arg type="o" direction="out"/></method>
    <property name="Locked" type="b" access="read"/>
    <property name="Label" type="s" access="read"/>
    <property name="Attributes" type="a{ss}" access="read"/>
  </interface>
  <interface name="org.freedesktop.Secret.Session"><method name="Close"/></interface>
</node>
""")
COLLECTION = "/org/freedesktop/secrets/collection/login"
ITEM = COLLECTION + "/1"
SESSION = "/org/freedesktop/secrets/session/1"

calls_by_sender = {}
# The item has the attributes it was last searched by; when items are created, those of the
# last one created.
attributes = {}
creating = declined_method == "CreateItem" and refusals == 0
created = None  # (attributes, secret) of the item created last


def service_call(connection, sender, path, interface, method, parameters, invocation):
    if method == declined_method:
        calls_by_sender[sender] = calls_by_sender.get(sender, 0) + 1
        if calls_by_sender[sender] <= refusals:
            print(f"{method} {sender} refused", flush=True)
            invocation.return_dbus_error("org.freedesktop.DBus.Error.UnknownMethod",
                                         refusal_text or f"Method {method} is not implemented on interface {interface}")
            return
        print(f"{method} {sender} answered", flush=True)
    if method == "SearchItems":
        wanted = parameters.unpack()[0]
        if creating:
            found = created is not None and all(created[0].get(k) == v for k, v in wanted.items())
            return invocation.return_value(GLib.Variant("(aoao)", ([ITEM] if found else [], [])))
        attributes.clear()
        attributes.update(wanted)
        invocation.return_value(GLib.Variant("(aoao)", ([ITEM], [])))
    elif method == "OpenSession" and creating and parameters.unpack()[0] != "plain":
        invocation.return_dbus_error("org.freedesktop.DBus.Error.NotSupported", "only plain sessions")
    elif method == "OpenSession":
        invocation.return_value(GLib.Variant("(vo)", (GLib.Variant("s", ""), SESSION)))
    elif method == "ReadAlias":
        invocation.return_value(GLib.Variant("(o)", (COLLECTION,)))


def collection_call(connection, sender, path, interface, method, parameters, invocation):
    global created
    properties_in, (_, _, value, _), _ = parameters.unpack()
    item_attributes = properties_in.get("org.freedesktop.Secret.Item.Attributes", {})
    created = (dict(item_attributes), bytes(value))
    attributes.clear()
    attributes.update(item_attributes)
    print(f"CreateItem {sender}", flush=True)
    invocation.return_value(GLib.Variant("(oo)", (COLLECTION + "/answered_elsewhere", "/")))


def item_call(connection, sender, path, interface, method, parameters, invocation):
    global created
    if method == "Delete":
        print(f"Delete {sender}", flush=True)
        if creating:
            created = None
        invocation.return_value(GLib.Variant("(o)", ("/",)))
    else:
        secret = created[1] if creating and created else b"the secret"
        invocation.return_value(GLib.Variant("((oayays))", ((SESSION, b"", secret, "text/plain"),)))


def session_call(connection, sender, path, interface, method, parameters, invocation):
    invocation.return_value(None)


def properties(connection, sender, path, interface, name):
    if name == "Label":
        return GLib.Variant("s", "an item")
    if name == "Attributes":
        return GLib.Variant("a{ss}", attributes)
    return GLib.Variant("b", False)


connection = Gio.DBusConnection.new_for_address_sync(
    address, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, None, None)
connection.register_object("/org/freedesktop/secrets", INTERFACES.lookup_interface("org.freedesktop.Secret.Service"),
                           service_call, None, None)
for path in [COLLECTION, "/org/freedesktop/secrets/aliases/default"]:
    connection.register_object(path, INTERFACES.lookup_interface("org.freedesktop.Secret.Collection"), collection_call, properties, None)
connection.register_object(ITEM, INTERFACES.lookup_interface("org.freedesktop.Secret.Item"), item_call, properties, None)
connection.register_object(SESSION, INTERFACES.lookup_interface("org.freedesktop.Secret.Session"), session_call, None, None)
owned = connection.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "RequestName",
                             GLib.Variant("(su)", ("org.freedesktop.secrets", 4)), GLib.VariantType("(u)"),
                             Gio.DBusCallFlags.NONE, 5000, None)
if owned.unpack()[0] != 1:
    sys.exit("org.freedesktop.secrets is owned by another connection")
print("ready", flush=True)

loop = GLib.MainLoop()
connection.connect("closed", lambda *_: loop.quit())
loop.run()
