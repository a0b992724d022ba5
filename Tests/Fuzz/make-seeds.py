#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the seed corpora in Tests/Fuzz/Corpus: small real examples of what each fuzz target
reads. The D-Bus messages are marshalled here by hand, as a bus and gnome-keyring send them; the
ID tokens and key sets are the fixtures' (Tests/Fixtures/IDTokens). Run it again only to change
the seeds (`python3 Tests/Fuzz/make-seeds.py`); the fuzzer's own finds stay out of git.
"""
import json
import os
import struct
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "Corpus")
FIXTURES = json.load(open(os.path.join(HERE, "..", "Fixtures", "IDTokens", "id-tokens.json")))


def seed(target, name, data):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as file:
        file.write(data if isinstance(data, bytes) else data.encode())


class Wire:
    """D-Bus marshalling (the specification's "Marshaling (Wire Format)")."""

    def __init__(self, endian="<"):
        self.endian, self.data = endian, bytearray()

    def pad(self, n):
        while len(self.data) % n:
            self.data.append(0)

    def byte(self, v):
        self.data.append(v)

    def u32(self, v):
        self.pad(4)
        self.data += struct.pack(self.endian + "I", v)

    def string(self, s):
        b = s.encode()
        self.u32(len(b))
        self.data += b + b"\0"

    def signature(self, s):
        self.data.append(len(s))
        self.data += s.encode() + b"\0"

    def array(self, alignment, fill):
        self.u32(0)
        at = len(self.data) - 4
        self.pad(alignment)
        start = len(self.data)
        fill(self)
        self.data[at:at + 4] = struct.pack(self.endian + "I", len(self.data) - start)


def message(kind, serial, fields, signature="", body=lambda w: None, endian="<"):
    """fields: (code, type, value) header fields; body fills the body."""
    b = Wire(endian)
    body(b)
    if signature:
        fields = fields + [(8, "g", signature)]
    w = Wire(endian)
    w.data += (b"l" if endian == "<" else b"B") + bytes([kind, 0, 1])
    w.u32(len(b.data))
    w.u32(serial)

    def put_fields(f):
        for code, type_, value in fields:
            f.pad(8)
            f.byte(code)
            f.signature(type_)
            {"o": f.string, "s": f.string, "u": f.u32, "g": f.signature}[type_](value)
    w.array(8, put_fields)
    w.pad(8)
    return bytes(w.data + b.data)


def reply(serial, reply_to, signature, body, endian="<"):
    return message(2, serial, [(5, "u", reply_to), (7, "s", ":1.0")], signature, body, endian)


def paths(*ps):
    return lambda w: w.array(4, lambda a: [a.string(p) for p in ps])


hello = reply(1, 1, "s", lambda w: w.string(":1.42"))
alias = reply(2, 2, "o", lambda w: w.string("/org/freedesktop/secrets/collection/login"))
search = reply(3, 3, "aoao", lambda w: (paths("/org/freedesktop/secrets/collection/login/7")(w), paths()(w)))
locked = reply(4, 4, "v", lambda w: (w.signature("b"), w.u32(0)))
error = message(3, 5, [(4, "s", "org.freedesktop.Secret.Error.IsLocked"), (5, "u", 3), (7, "s", ":1.0")], "s",
                lambda w: w.string("the collection is locked"))
big = reply(4, 4, "v", lambda w: (w.signature("b"), w.u32(1)), endian=">")
call = message(1, 7, [(1, "o", "/org/freedesktop/secrets"), (2, "s", "org.freedesktop.Secret.Service"), (3, "s", "SearchItems"),
                      (6, "s", "org.freedesktop.secrets")], "a{ss}",
               lambda w: w.array(8, lambda a: [(a.pad(8), a.string(k), a.string(v)) for k, v in [("service", "io.github.authctl"), ("account", "ä")]]))
signal = message(4, 9, [(1, "o", "/org/freedesktop/DBus"), (2, "s", "org.freedesktop.DBus"), (3, "s", "NameAcquired")], "s",
                 lambda w: w.string(":1.42"))
for name, data in [("hello", hello), ("read-alias", alias), ("search-items", search), ("locked", locked), ("error", error),
                   ("big-endian", big), ("method-call", call), ("signal", signal)]:
    seed("bus-message", name, data)
ok = b"OK 1e5fcbd0ad3b4c1d8b7c61f1a2e3d4c5\r\n"
seed("bus-conversation", "status", ok + hello + signal + alias + search + locked)
seed("bus-conversation", "out-of-order", ok + hello + locked + search + alias)
seed("bus-conversation", "locked-error", ok + hello + alias + error)
seed("bus-conversation", "big-endian", ok + hello + alias + search + big)
seed("bus-conversation", "rejected", b"REJECTED EXTERNAL\r\n")

# Login-event signals as GDBus hands their arguments over: GVariants in GLib's own serialisation,
# made by GLib (a few lines of C) from their text form. The first byte picks the type the check reads.
SIGNALS = [
    ("signed-in", 0, "('io.github.authctl', 'signed-in', 'ada@example.com', {'reason': <'password'>, "
                     "'timestamp': <uint64 1900000000000000>, 'sequence': <uint64 42>, 'name': <'Ada Lovelace'>})"),
    ("switched", 0, "('io.github.authctl', 'signed-in', 'bob@example.com', {'reason': <'switched'>, 'timestamp': <uint64 1>, "
                    "'sequence': <uint64 43>, 'previous-user': <'ada@example.com'>, 'extra': <[1, 2]>})"),
    ("signed-out", 0, "('io.github.authctl', 'signed-out', 'ada@example.com', {'reason': <'expired'>, "
                      "'timestamp': <uint64 18446744073709551615>, 'sequence': <uint64 44>})"),
    ("other-service", 0, "('org.example.other', 'signed-in', 'eve', {'reason': <'password'>, 'timestamp': <uint64 0>, 'sequence': <uint64 0>})"),
    ("short", 1, "('io.github.authctl', 'signed-in', {'reason': <'password'>})"),
]
PROGRAM = r"""
#include <glib.h>
#include <stdio.h>
int main(int argc, char **argv) {
    GError *error = NULL;
    GVariant *value = g_variant_parse(NULL, argv[1], NULL, NULL, &error);
    if (!value) { fprintf(stderr, "%s\n", error->message); return 1; }
    fwrite(g_variant_get_data(value), 1, g_variant_get_size(value), stdout);
    return 0;
}
"""
with tempfile.TemporaryDirectory() as folder:
    source, program = os.path.join(folder, "serialise.c"), os.path.join(folder, "serialise")
    open(source, "w").write(PROGRAM)
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "glib-2.0"], check=True, capture_output=True, text=True).stdout.split()
    subprocess.run(["cc", source, "-o", program] + flags, check=True)
    for name, selector, text in SIGNALS:
        seed("bus-signal", name, bytes([selector]) + subprocess.run([program, text], check=True, capture_output=True).stdout)

for name, token in FIXTURES["tokens"].items():
    seed("jws", name.replace(" ", "-").replace("'", ""), token)
seed("jws", "access-token", "eyJhbGciOiJSUzI1NiJ9.eyJleHAiOjE5MDAwMDM2MDAsImlhdCI6MTkwMDAwMDAwMCwic3ViIjoiYWRhIn0.c2ln")
for name, keys in FIXTURES["keySets"].items():
    seed("jwks", name.replace(" ", "-"), keys)

issuer = FIXTURES["issuer"]
discovery = {
    "issuer": issuer, "authorization_endpoint": issuer + "/protocol/openid-connect/auth",
    "token_endpoint": issuer + "/protocol/openid-connect/token",
    "device_authorization_endpoint": issuer + "/protocol/openid-connect/auth/device",
    "userinfo_endpoint": issuer + "/protocol/openid-connect/userinfo",
    "revocation_endpoint": issuer + "/protocol/openid-connect/revoke", "jwks_uri": issuer + "/protocol/openid-connect/certs",
    "authorization_response_iss_parameter_supported": True, "response_types_supported": ["code"],
    "id_token_signing_alg_values_supported": ["RS256", "ES256"],
}
seed("discovery", "keycloak", json.dumps(discovery, indent=2))
seed("discovery", "minimal", json.dumps({"issuer": issuer + "/", "token_endpoint": "https://id.example.com:443/t",
                                         "jwks_uri": "https://ID.example.com/k", "device_authorization_endpoint": "https://id.example.com/d"}))


def selector(request, status_index):
    return bytes([next(s for s in range(256) if (s >> 4) % 6 == request and s % 12 == status_index)])


access = FIXTURES["tokens"]["RS256"]
oauth2 = json.dumps({"access_token": access, "token_type": "Bearer", "expires_in": 300, "refresh_token": "r-1.abc",
                     "refresh_expires_in": 1800, "id_token": access, "scope": "openid"})
jsonapi = json.dumps({"accessToken": access, "accessTokenExpire": 1900000400000, "refreshToken": "r-2",
                      "refreshTokenExpire": 1900086400000})
for request in range(6):
    body = jsonapi if request in (2, 3, 4) else oauth2
    seed("token-answer", f"request-{request}-ok", selector(request, 0) + body.encode())
seed("token-answer", "server-clock-ahead", selector(2, 0) + b"Tue, 19 Jan 2038 03:14:08 GMT\0" + jsonapi.encode())
seed("token-answer", "server-clock-behind", selector(0, 0) + b"Thu, 01 Jan 1970 00:00:00 GMT\0" + oauth2.encode())
seed("token-answer", "invalid-grant", selector(0, 4) + b'{"error":"invalid_grant","error_description":"Invalid user credentials"}')
seed("token-answer", "json-failure", selector(2, 8) + b'{"code":42,"message":"database down"}')
seed("token-answer", "redirect", selector(1, 10) + b"")

device = json.dumps({"device_code": "GmRhmhcxhwAzkoEqiMEg_DnyEysNkuNhszIySk9eS", "user_code": "WDJB-MJHT",
                     "verification_uri": "https://id.example.com/device", "verification_uri_complete": "https://id.example.com/device?user_code=WDJB-MJHT",
                     "expires_in": 1800, "interval": 5})
seed("device-flow", "approved", bytes([0x00]) + device.encode() + b"\0" + oauth2.encode())
seed("device-flow", "pending", bytes([0x40]) + device.encode() + b"\0" + b'{"error":"authorization_pending"}')
seed("device-flow", "slow-down", bytes([0x40]) + device.encode() + b"\0" + b'{"error":"slow_down"}')
seed("device-flow", "refused", bytes([0x04]) + b'{"error":"invalid_client","error_description":"Unknown client"}')

seed("git-credential", "get", "protocol=https\nhost=git.example.com\npath=team/repo.git\n\n")
seed("git-credential", "store", "protocol=https\nhost=git.example.com:8443\nusername=ada\npassword=eyJhbGciOi\npassword_expiry_utc=1900003600\n")
seed("git-credential", "loopback", "protocol=http\nhost=127.0.0.1:3000\nwwwauth[]=Basic realm=\"Gitea\"\n\n")

seed("docker-config", "docker", json.dumps({"auths": {"https://index.docker.io/v1/": {"auth": "YWRhOnNlY3JldA=="}},
                                            "credHelpers": {"gcr.io": "gcloud"}, "credsStore": "desktop",
                                            "HttpHeaders": {"User-Agent": "Docker-Client/24.0.7 (linux)"}}, indent="\t"))
seed("docker-config", "already", json.dumps({"credHelpers": {"registry.example.com": "authctl"}}, indent="\t") + "\n")
seed("docker-config", "empty", "")
seed("docker-config", "not-an-object", "[1, 2.5e3, -0, null, \"\\u00e9\"]")

seed("kube-exec-info", "v1", json.dumps({"kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1",
                                         "spec": {"interactive": False}}))
seed("kube-exec-info", "v1beta1", json.dumps({"kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1beta1",
                                              "spec": {"cluster": {"server": "https://k8s.example.com:6443",
                                                                   "certificate-authority-data": "LS0tLS1CRUdJTi0tLS0t"}, "interactive": True}}))
seed("kube-exec-info", "other-version", '{"apiVersion":"client.authentication.k8s.io/v2"}')

seed("settings", "signed-in-oidc", f"""# authctl settings
[other.service]
user=bob@example.com
sequence=3

[io.github.authctl]
user=ada@example.com
name=Ada Lovelace
signed-in-at=2030-03-17T17:46:40Z
server={issuer}
protocol=oidc
client-id=authctl
scope=openid profile email
account-claim=email
redirect-port=8400
issuer={issuer}
token-endpoint={issuer}/protocol/openid-connect/token
authorization-endpoint={issuer}/protocol/openid-connect/auth
jwks-uri={issuer}/protocol/openid-connect/certs
email=ada@example.com
git-hosts=git.example.com;git.example.com:8443;
registries=registry.example.com;ghcr.io:443=oauth2;
access-expires-at=2030-03-17T17:51:40Z
refresh-expires-at=2030-03-17T18:16:40.250Z
clock-offset=-2
access-lifetime=300
sequence=41
""")
seed("settings", "signed-out", "[io.github.authctl]\nsequence=42\nserver=https://auth.example.com/api\nprotocol=json\nended=expired\n")
seed("settings", "local", "[io.github.authctl]\nuser=ada\nname=Ada \\s\\\\x\nsequence=1\nrenewable=false\n[io.github.authctl]\nsequence=2\n")

seed("loopback-query", "code", "code=SplxlOBeZQQYbYS6WxSbIA&state=af0ifjsldkj&iss=https%3A%2F%2Fid.example.com%2Frealms%2Fdesk")
seed("loopback-query", "error", "error=access_denied&error_description=The+user+denied+the+request&state=af0ifjsldkj")
seed("loopback-query", "odd", "state&=&&a=%C3%A9%2B+b")

state = "af0ifjsldkj"
for name, request in [("callback", f"GET /callback?code=SplxlOBeZQQYbYS6WxSbIA&state={state} HTTP/1.1\r\nHost: 127.0.0.1:8400\r\n\r\n"),
                      ("wrong-state", "GET /callback?code=x&state=forged HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
                      ("two-states", f"GET /callback?state={state}&state={state} HTTP/1.0\r\n\r\n"),
                      ("favicon", "GET /favicon.ico HTTP/1.1\r\nHost: 127.0.0.1:8400\r\nUser-Agent: Mozilla/5.0\r\nAccept: */*\r\n\r\n"),
                      ("post", f"POST /callback?state={state} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\n\r\na=b")]:
    seed("loopback-request", name, request)

for index, text in enumerate(["io.github.authctl", "ada@example.com", "HTTPS://Auth.Example.com:443/api?x=%41", "https://Registry.Example.com:5000/v2/",
                              "ghcr.io:443=oauth2", "https://git.example.com:8443", "https://id.example.com/realms/desk\0oidc\0authctl\0openid email\0",
                              "unix:path=/run/user/1000/bus,guid=1e5fcbd0ad3b4c1d8b7c61f1a2e3d4c5", "2030-03-17T17:46:40.123456+02:00",
                              "arn:aws:iam::123456789012:role/dev/ci\0\x1c\x20\0ci@build=7\0eu-west-3\0", "ada.lovelace+ci@example.org",
                              "Sun, 17 Mar 2030 17:48:20 GMT"]):
    seed("validators", f"{index}", bytes([index]) + text.encode())
seed("validators", "9-endpoint", bytes([9]) + b"arn:aws-cn:iam::123456789012:role/r\0\0\0\0http://127.0.0.1:4566/")
seed("validators", "7-abstract", bytes([7]) + b"unix:abstract=/tmp/dbus-%41bc;tcp:host=x")
seed("validators", "2-loopback", bytes([2]) + b"http://127.0.0.1:8080")
seed("validators", "3-ipv6", bytes([3]) + b"[::1]:5000")

# proxy-variables: a selector byte (bit N sets https_proxy, http_proxy, all_proxy, no_proxy; bit 7
# puts a marker in each proxy's password), then the values and the request's host, NUL-separated.
for name, selector, parts in [
    ("https", 0x01, ["http://proxy.corp.example:3128", "", "", "", "idp.example.com"]),
    ("credentials", 0x81, ["http://ada:s%40cret@proxy.corp.example:8080/", "", "", "", "idp.example.com"]),
    ("all-no-scheme", 0x0C, ["", "", "proxy:3128", "localhost,.corp.example, 10.0.0.0/8", "git.corp.example"]),
    ("no-proxy-address", 0x09, ["http://[::1]:3128", "", "", "*", "10.1.2.3"]),
    ("ipv6-zone", 0x05, ["http://[fe80::1%25eth0]:8080", "", "socks5://proxy:1080", "", "[2001:db8::1]"]),
    ("loopback", 0x01, ["https://proxy:443", "", "", "", "127.0.0.1:8443"]),
]:
    seed("proxy-variables", name, bytes([selector]) + "\0".join(parts).encode())

# pasted-address: the line pasted at the terminal; @P stands for the listener's port, @S for its state.
for name, line in [
    ("callback", "http://127.0.0.1:@P/callback?code=SplxlOBeZQQYbYS6WxSbIA&state=@S&iss=https%3A%2F%2Fid.example.com\n"),
    ("no-scheme", "  127.0.0.1:@P/callback?state=@S&code=abc#fragment\r\n"),
    ("error", "http://127.0.0.1:@P/callback?error=access_denied&error_description=The+user+denied&state=@S"),
    ("other-state", "http://127.0.0.1:@P/callback?code=abc&state=another"),
    ("two-codes", "http://127.0.0.1:@P/callback?code=a&code=b&state=@S"),
    ("bare-code", "SplxlOBeZQQYbYS6WxSbIA"),
]:
    seed("pasted-address", name, line)

# sts-answer: a byte for the HTTP status (200, 400, 403, 500, 302 by its value mod 5), then STS's answer.
STS = "https://sts.amazonaws.com/doc/2011-06-15/"
seed("sts-answer", "credentials", b"\0" + f"""<AssumeRoleWithWebIdentityResponse xmlns="{STS}">
  <AssumeRoleWithWebIdentityResult>
    <SubjectFromWebIdentityToken>sub-ada</SubjectFromWebIdentityToken>
    <Credentials>
      <SessionToken>FwoGZXIvYXdzEBYaDH+/session=token</SessionToken>
      <SecretAccessKey>wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY</SecretAccessKey>
      <Expiration>2030-03-17T18:46:40Z</Expiration>
      <AccessKeyId>ASIAEXAMPLE123456789</AccessKeyId>
    </Credentials>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata><RequestId>ad4156e9</RequestId></ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>""".encode())
seed("sts-answer", "error", b"\1" + f"""<ErrorResponse xmlns="{STS}"><Error><Type>Sender</Type><Code>InvalidIdentityToken</Code><Message>Couldn't retrieve verification key</Message></Error><RequestId>1</RequestId></ErrorResponse>""".encode())
seed("sts-answer", "entity", b"\0" + b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x "y">]><r>&x;</r>')
seed("sts-answer", "cdata", b"\0" + f"""<AssumeRoleWithWebIdentityResponse xmlns="{STS}"><AssumeRoleWithWebIdentityResult><Credentials><SessionToken><![CDATA[t]]></SessionToken><SecretAccessKey>s&amp;</SecretAccessKey><Expiration>2030-03-17T18:46:40.5+01:00</Expiration><AccessKeyId>A&#x42;</AccessKeyId></Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>""".encode())

# aws-config: a byte for the profile (dev, default, a.b-c, x), then the file.
seed("aws-config", "crlf", b"\0" + b"# team\r\n[default]\r\nregion = eu-west-1\r\n\r\n[profile   dev]\r\nregion=us-east-1\r\ncredential_process = old\r\n   --flag\r\ns3 =\r\n  addressing_style = path\r\n; c\r\n[sso-session dev]\r\nx = y\r\n")
seed("aws-config", "default", b"\1" + b"\xef\xbb\xbf[default]\nregion: x\n[profile default]\ncredential_process=a\n")
seed("aws-config", "empty", b"\3")
