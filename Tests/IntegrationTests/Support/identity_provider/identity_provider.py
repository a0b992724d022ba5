# SPDX-License-Identifier: Apache-2.0
"""A real OpenID Connect provider for authctl's tests: django-oauth-toolkit on 127.0.0.1, with its
database in a folder of the caller's and its people and clients made at start (README.md beside
this file says what it serves and how to drive it).

  identity_provider.py --database-dir DIR [--port N] [--log FILE] [--access-token-lifetime S] ...

It prints "listening PORT" on its first line once it accepts connections, and ends when its
standard input, a pipe, closes. Run it with the Python of .ci/install-python-deps's environment.
"""
import argparse
import os
import secrets
import socketserver
import stat
import sys
import threading
import time
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

started = time.monotonic()
here = os.path.dirname(os.path.abspath(__file__))

BROWSER_CLIENT_ID = "authctl-browser"
DEVICE_CLIENT_ID = "authctl-device"


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-dir", required=True, help="folder for the SQLite database (made if missing)")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: one the system picks)")
    parser.add_argument("--log", help="append every request to this file, one JSON object a line")
    parser.add_argument("--access-token-lifetime", type=int, default=300, help="seconds (ACCESS_TOKEN_EXPIRE_SECONDS)")
    parser.add_argument("--id-token-lifetime", type=int, default=300, help="seconds (ID_TOKEN_EXPIRE_SECONDS)")
    parser.add_argument(
        "--refresh-token-lifetime", type=int, default=None,
        help="seconds after its access token expired that a refresh token dies (REFRESH_TOKEN_EXPIRE_SECONDS; default never)")
    parser.add_argument("--authorization-code-lifetime", type=int, default=60, help="seconds (AUTHORIZATION_CODE_EXPIRE_SECONDS)")
    parser.add_argument("--refresh-grace-period", type=int, default=0,
                        help="seconds a rotated refresh token is still taken (REFRESH_TOKEN_GRACE_PERIOD_SECONDS)")
    parser.add_argument("--no-rotation", action="store_true", help="a refresh keeps the refresh token (ROTATE_REFRESH_TOKEN off)")
    parser.add_argument("--no-reuse-protection", action="store_true",
                        help="reusing a rotated refresh token does not revoke its family (REFRESH_TOKEN_REUSE_PROTECTION off)")
    parser.add_argument("--device-interval", type=int, default=1, help="seconds between device-flow polls (DEVICE_FLOW_INTERVAL)")
    parser.add_argument("--device-code-lifetime", type=int, default=1800,
                        help="seconds a device code and its user code live (the answer's expires_in)")
    parser.add_argument("--no-iss-parameter", action="store_true",
                        help="no RFC 9207 iss in authorization responses, and none announced in discovery")
    parser.add_argument("--tls-name", help="also serve HTTPS, on a port of its own, as this host name (for the issuer)")
    parser.add_argument("--tls-cert", help="the HTTPS listener's certificate chain (PEM) for --tls-name")
    parser.add_argument("--tls-key", help="its private key (PEM)")
    parser.add_argument("--complete-discovery", action="store_true",
                        help="discovery also names revocation_endpoint and device_authorization_endpoint")
    return parser.parse_args()


class Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    request_queue_size = 64


class TLSServer(Server):
    """The HTTPS listener: TLS is taken on in the connection's own thread, so a client that
    never finishes its handshake holds up nobody else."""

    context = None

    def finish_request(self, request, client_address):
        try:
            request = self.context.wrap_socket(request, server_side=True)
        except OSError:
            return
        super().finish_request(request, client_address)


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):
        pass  # idp_site.Recorder logs what a test needs


class QuietTLSHandler(QuietHandler):
    def get_environ(self):
        environ = super().get_environ()
        environ["HTTPS"] = "on"  # Django then builds https:// URLs (the issuer among them)
        environ["wsgi.url_scheme"] = "https"
        return environ


def private_key_pem():
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def configure_django(options, base):
    from django.conf import settings

    settings.configure(
        DEBUG=False,
        SECRET_KEY=secrets.token_urlsafe(40),
        ALLOWED_HOSTS=["127.0.0.1", "localhost"] + ([options.tls_name] if options.tls_name else []),
        ROOT_URLCONF="idp_site",
        INSTALLED_APPS=["django.contrib.auth", "django.contrib.contenttypes", "django.contrib.sessions", "oauth2_provider"],
        MIDDLEWARE=[
            "idp_site.Recorder",
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.middleware.csrf.CsrfViewMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
        ],
        TEMPLATES=[{
            "BACKEND": "django.template.backends.django.DjangoTemplates",
            "DIRS": [os.path.join(here, "templates")],
            "APP_DIRS": True,
            "OPTIONS": {"context_processors": ["django.template.context_processors.request",
                                               "django.contrib.auth.context_processors.auth"]},
        }],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3",
                               "NAME": os.path.join(options.database_dir, "identity_provider.sqlite3"),
                               # Each transaction takes the write lock when it starts: two at once
                               # then wait for each other instead of failing with "database is
                               # locked" when both read and then write (two refreshes at once).
                               "OPTIONS": {"timeout": 30, "transaction_mode": "IMMEDIATE"}}},
        DEFAULT_AUTO_FIELD="django.db.models.AutoField",
        USE_TZ=True,
        # Tables made straight from the models, not by replaying every migration: start-up in a
        # fraction of the time.
        MIGRATION_MODULES={app: None for app in ("auth", "contenttypes", "sessions", "oauth2_provider")},
        STATIC_URL="/static/",
        LOGIN_URL="/accounts/login/",
        AUTHENTICATION_BACKENDS=["idp_site.EmailOrUserName"],
        # Fixture passwords only: the fast hasher keeps start-up and sign-in quick.
        PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],
        LOGGING={"version": 1, "disable_existing_loggers": False,
                 "handlers": {"stderr": {"class": "logging.StreamHandler"}},
                 "loggers": {"django.request": {"handlers": ["stderr"], "level": "ERROR"}}},
        OAUTH2_PROVIDER={
            "OIDC_ENABLED": True,
            "OIDC_RSA_PRIVATE_KEY": private_key_pem(),
            "OAUTH2_VALIDATOR_CLASS": "idp_site.Claims",
            "SCOPES": {"openid": "Sign you in", "profile": "Your name and user name", "email": "Your e-mail address"},
            "DEFAULT_SCOPES": ["openid", "profile", "email"],
            "OIDC_RESPONSE_TYPES_SUPPORTED": ["code"],
            "OIDC_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": ["none"],
            "PKCE_REQUIRED": True,
            "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,  # S256 only: plain is refused
            "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
            "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
            "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": not options.no_iss_parameter,
            "ACCESS_TOKEN_EXPIRE_SECONDS": options.access_token_lifetime,
            "ID_TOKEN_EXPIRE_SECONDS": options.id_token_lifetime,
            "REFRESH_TOKEN_EXPIRE_SECONDS": options.refresh_token_lifetime,
            "AUTHORIZATION_CODE_EXPIRE_SECONDS": options.authorization_code_lifetime,
            "ROTATE_REFRESH_TOKEN": not options.no_rotation,
            "REFRESH_TOKEN_REUSE_PROTECTION": not options.no_reuse_protection,
            "REFRESH_TOKEN_GRACE_PERIOD_SECONDS": options.refresh_grace_period,
            "REQUEST_APPROVAL_PROMPT": "force",  # the consent page every time, so a test can refuse
            "OAUTH_DEVICE_VERIFICATION_URI": base + "/o/device/",
            "OAUTH_DEVICE_VERIFICATION_URI_COMPLETE": base + "/o/device/?user_code={user_code}",
            "DEVICE_FLOW_INTERVAL": options.device_interval,
            # /_config changes settings at run time; oauthlib's server takes them only when made anew.
            "ALWAYS_RELOAD_OAUTHLIB_CORE": True,
        },
    )


def create_fixtures():
    from django.contrib.auth import get_user_model
    from oauth2_provider.models import get_application_model

    import idp_site

    User = get_user_model()
    for name, claims in idp_site.PEOPLE.items():
        first, _, last = claims["name"].partition(" ")
        User.objects.create_user(name, email=claims["email"], password=idp_site.PASSWORD, first_name=first, last_name=last)
    Application = get_application_model()
    Application.objects.create(
        client_id=BROWSER_CLIENT_ID, name="authctl (browser)", client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE, algorithm=Application.RS256_ALGORITHM,
        redirect_uris="http://127.0.0.1/callback http://[::1]/callback", client_secret="")
    Application.objects.create(
        client_id=DEVICE_CLIENT_ID, name="authctl (device)", client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_DEVICE_CODE, algorithm=Application.RS256_ALGORITHM,
        redirect_uris="", client_secret="")


def main():
    options = arguments()
    os.makedirs(options.database_dir, exist_ok=True)
    sys.path.insert(0, here)
    os.environ.setdefault("OAUTHLIB_INSECURE_TRANSPORT", "1")  # plain HTTP on loopback
    # Bound first, so the port is known to the settings (the device verification URI); connections
    # wait in the backlog until the server serves.
    server = Server(("127.0.0.1", options.port), QuietHandler)
    port = server.server_address[1]
    configure_django(options, "http://127.0.0.1:%d" % port)

    import django
    from django.core.management import call_command
    from django.core.wsgi import get_wsgi_application

    django.setup()
    call_command("migrate", run_syncdb=True, verbosity=0, interactive=False)
    create_fixtures()
    import idp_site

    idp_site.log_file = options.log
    idp_site.complete_discovery = options.complete_discovery
    idp_site.device_code_lifetime = options.device_code_lifetime
    server.set_app(get_wsgi_application())
    if options.tls_name:
        import ssl

        tls_server = TLSServer(("127.0.0.1", 0), QuietTLSHandler)
        tls_server.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls_server.context.load_cert_chain(options.tls_cert, options.tls_key)
        tls_server.set_app(server.get_app())
        idp_site.tls_port = tls_server.server_address[1]
        threading.Thread(target=tls_server.serve_forever, daemon=True).start()
    print("listening %d" % port, flush=True)
    print("started in %.2f s" % (time.monotonic() - started), file=sys.stderr, flush=True)
    # Started with a pipe on stdin, it ends when the pipe closes: a test run that dies leaves no
    # provider behind.
    if stat.S_ISFIFO(os.fstat(0).st_mode):
        threading.Thread(target=lambda: (sys.stdin.read(), server.shutdown()), daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
