# SPDX-License-Identifier: Apache-2.0
"""The Django side of the test identity provider (see identity_provider.py and README.md): the URL
map, the claims, the login backend, and the test-only views that count and log requests.

Imported by Django once it is set up (the settings name these by dotted path), never before.
"""
import json
import threading
import time
import urllib.parse

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.views import LoginView
from django.http import JsonResponse
from django.urls import include, path, reverse
from django.views.decorators.csrf import csrf_exempt
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.views import ConnectDiscoveryInfoView
from oauth2_provider.views.device import DeviceAuthorizationView
from oauthlib.oauth2 import DeviceApplicationServer

# The people the provider knows: login name -> claims beyond the ones Django's user holds.
# eve's address is not verified, so a client must not take it as her account id.
PEOPLE = {
    "ada": {"sub": "sub-ada", "email": "ada@example.org", "email_verified": True, "name": "Ada Lovelace"},
    "grace": {"sub": "sub-grace", "email": "grace@example.org", "email_verified": True, "name": "Grace Hopper"},
    "eve": {"sub": "sub-eve", "email": "eve@example.org", "email_verified": False, "name": "Eve Unverified"},
}
PASSWORD = "correct horse battery staple"


def claim(name):
    return lambda request: PEOPLE[request.user.get_username()][name]


class Claims(OAuth2Validator):
    """The OpenID claims of the signed-in person, in the ID token and at userinfo. The method takes
    no request, so DOT lists the claims in discovery's claims_supported."""

    def get_additional_claims(self):
        return {
            "sub": claim("sub"),
            "email": claim("email"),
            "email_verified": claim("email_verified"),
            "preferred_username": lambda request: request.user.get_username(),
            "name": claim("name"),
        }


class EmailOrUserName(ModelBackend):
    """Signs a person in by user name or by e-mail address, as most providers do."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if username and "@" in username:
            match = get_user_model().objects.filter(email__iexact=username).first()
            username = match.get_username() if match else username
        return super().authenticate(request, username=username, password=password, **kwargs)


# What the provider was asked, for the tests: a count per endpoint and a log of every request.
lock = threading.Lock()
counts = {}
log = []
log_file = None  # set by identity_provider.py: a path that gets one JSON object a line


def endpoint_of(path, fields):
    """The name a request is counted under (README.md lists them)."""
    if path.endswith("/.well-known/openid-configuration") or path.endswith("/.well-known/openid-configuration/"):
        return "discovery"
    names = {
        "/o/.well-known/jwks.json": "jwks",
        "/o/authorize/": "authorize",
        "/o/userinfo/": "userinfo",
        "/o/revoke_token/": "revoke",
        "/o/device-authorization/": "device_authorization",
        "/o/device/": "device_page",
        "/accounts/login/": "login",
    }
    if path == "/o/token/":
        grant = fields.get("grant_type", "")
        return {
            "authorization_code": "authorization_code",
            "refresh_token": "refresh",
            "urn:ietf:params:oauth:grant-type:device_code": "device_poll",
        }.get(grant, "token_other")
    if path.startswith("/o/device-confirm/"):
        return "device_confirm"
    if path.startswith("/o/device-grant-status/"):
        return "device_status"
    return names.get(path, "other")


class Recorder:
    """Middleware: counts and logs every request except the test-only ones under /_."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path.startswith("/_"):
            return self.get_response(request)
        fields = {}
        if request.method == "POST" and request.content_type == "application/x-www-form-urlencoded":
            fields = {k: v[-1] for k, v in urllib.parse.parse_qs(request.body.decode("utf-8", "replace"), keep_blank_values=True).items()}
        arrived = time.time()
        endpoint = endpoint_of(request.path, fields)
        if endpoint == "refresh" and refresh_delay:
            # A slow provider: every concurrent refresher is certain to have started before
            # the first refresh is answered.
            time.sleep(refresh_delay)
        response = self.get_response(request)
        entry = {
            "time": arrived,
            "seconds": round(time.time() - arrived, 4),
            "method": request.method,
            "path": request.path,
            "query": request.META.get("QUERY_STRING", ""),
            "endpoint": endpoint,
            "fields": fields,
            "authorization": request.headers.get("Authorization"),
            "userAgent": request.headers.get("User-Agent"),
            "accept": request.headers.get("Accept"),
            "tls": request.is_secure(),
            "host": request.get_host(),
            "status": response.status_code,
            "location": response.get("Location"),
        }
        with lock:
            counts[endpoint] = counts.get(endpoint, 0) + 1
            if request.path.startswith("/o/token/"):
                counts["token"] = counts.get("token", 0) + 1
            log.append(entry)
            if log_file:
                with open(log_file, "a") as file:
                    file.write(json.dumps(entry) + "\n")
        return response


tls_port = None  # set by identity_provider.py when it also serves HTTPS


def tls(request):
    return JsonResponse({"port": tls_port})


def stats(request):
    with lock:
        return JsonResponse(dict(counts))


def request_log(request):
    with lock:
        return JsonResponse(list(log), safe=False)


# Settings /_config may change while the provider runs (README.md), by DOT's names.
CONFIGURABLE = {
    "ACCESS_TOKEN_EXPIRE_SECONDS", "REFRESH_TOKEN_EXPIRE_SECONDS", "ID_TOKEN_EXPIRE_SECONDS",
    "AUTHORIZATION_CODE_EXPIRE_SECONDS", "REFRESH_TOKEN_GRACE_PERIOD_SECONDS", "REFRESH_TOKEN_REUSE_PROTECTION",
    "ROTATE_REFRESH_TOKEN", "DEVICE_FLOW_INTERVAL", "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS",
    "DEVICE_CODE_EXPIRE_SECONDS",  # not DOT's: the device code's lifetime (--device-code-lifetime)
    "REFRESH_DELAY_SECONDS",  # not DOT's: how long each refresh request waits before it is answered
}

refresh_delay = 0


@csrf_exempt
def configure(request):
    if request.method != "POST":
        return JsonResponse({"error": "POST a JSON object of settings"}, status=405)
    changes = json.loads(request.body or b"{}")
    unknown = sorted(set(changes) - CONFIGURABLE)
    if unknown:
        return JsonResponse({"error": "not configurable: %s" % ", ".join(unknown)}, status=400)
    global device_code_lifetime, refresh_delay
    for name, value in changes.items():
        if name == "DEVICE_CODE_EXPIRE_SECONDS":
            device_code_lifetime = value
        elif name == "REFRESH_DELAY_SECONDS":
            refresh_delay = value
        else:
            setattr(oauth2_settings, name, value)
    current = {name: getattr(oauth2_settings, name) for name in sorted(CONFIGURABLE - {"DEVICE_CODE_EXPIRE_SECONDS", "REFRESH_DELAY_SECONDS"})}
    return JsonResponse(dict(current, DEVICE_CODE_EXPIRE_SECONDS=device_code_lifetime, REFRESH_DELAY_SECONDS=refresh_delay))


def live_refresh_tokens(request):
    """How many refresh tokens are neither revoked nor rotated away, per person."""
    from oauth2_provider.models import get_refresh_token_model

    live = {}
    for token in get_refresh_token_model().objects.filter(revoked__isnull=True).select_related("user"):
        live[token.user.get_username()] = live.get(token.user.get_username(), 0) + 1
    return JsonResponse(live)


# The lifetime of a device code and its user code, in seconds; set by identity_provider.py. DOT
# leaves oauthlib's 1800 s, which its server does not pass on.
device_code_lifetime = 1800


class DeviceServer(DeviceApplicationServer):
    def __init__(self, request_validator, verification_uri, **kwargs):
        super().__init__(request_validator, verification_uri, **kwargs)
        self._expires_in = device_code_lifetime


DeviceAuthorizationView.server_class = DeviceServer


# Whether discovery also names the revocation and device authorization endpoints, which DOT's
# OpenID discovery leaves out (its RFC 8414 document has the first); set by identity_provider.py.
complete_discovery = False


class Discovery(ConnectDiscoveryInfoView):
    def get(self, request, *args, **kwargs):
        response = super().get(request, *args, **kwargs)
        if not complete_discovery:
            return response
        document = json.loads(response.content)
        document["revocation_endpoint"] = request.build_absolute_uri(reverse("oauth2_provider:revoke-token"))
        document["device_authorization_endpoint"] = request.build_absolute_uri(reverse("oauth2_provider:device-authorization"))
        answer = JsonResponse(document)
        answer["Access-Control-Allow-Origin"] = "*"
        return answer


urlpatterns = [
    path("o/.well-known/openid-configuration", Discovery.as_view()),
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
    path("accounts/login/", LoginView.as_view(), name="login"),
    path("_stats", stats),
    path("_log", request_log),
    path("_config", configure),
    path("_live", live_refresh_tokens),
    path("_tls", tls),
]
