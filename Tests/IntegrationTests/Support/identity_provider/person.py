# SPDX-License-Identifier: Apache-2.0
"""The person at the test identity provider, played over plain HTTP (Python's standard library
only): a cookie jar, redirects followed one at a time so the walk can stop at the client's
loopback callback, and the provider's forms read and filled in as a browser would.

Settings come from the environment (README.md lists them):
  IDP_USER       who signs in: a user name or e-mail address (default ada)
  IDP_PASSWORD   their password (default the fixtures' one)
  IDP_DECISION   approve (default), deny, or ignore: leave at the consent page, as a person who
                 closes the tab
  IDP_RESULT     a file that gets the outcome as one JSON object, written whole (renamed into place)
  IDP_TIMEOUT    seconds for each request (default 30)
"""
import html.parser
import http.cookiejar
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request

PASSWORD = "correct horse battery staple"


def setting(name, default):
    return os.environ.get(name) or default


class Forms(html.parser.HTMLParser):
    """The forms of a page: each a dict with id, action, method, and its inputs and buttons as
    (name, value, type) in page order."""

    def __init__(self):
        super().__init__()
        self.forms = []

    def handle_starttag(self, tag, attributes):
        attributes = dict(attributes)
        if tag == "form":
            self.forms.append({"id": attributes.get("id"), "action": attributes.get("action") or "",
                               "method": (attributes.get("method") or "get").lower(), "fields": []})
        elif tag in ("input", "button") and self.forms:
            kind = attributes.get("type") or ("submit" if tag == "button" else "text")
            self.forms[-1]["fields"].append((attributes.get("name"), attributes.get("value") or "", kind))


def forms_of(page):
    parser = Forms()
    parser.feed(page)
    return parser.forms


class NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


class Person:
    """A browser session: cookies kept, every answer recorded in `steps`."""

    def __init__(self):
        self.user = setting("IDP_USER", "ada")
        self.password = setting("IDP_PASSWORD", PASSWORD)
        self.decision = setting("IDP_DECISION", "approve")
        self.timeout = float(setting("IDP_TIMEOUT", "30"))
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()), NoRedirects())
        self.steps = []

    def request(self, url, form=None):
        """One request, redirects not followed: (status, headers, body text)."""
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        headers = {"User-Agent": "identity-provider-person/1"}
        if form is not None:
            # As a browser sends it with a form: Django's CSRF check needs it (or a Referer) over HTTPS.
            parts = urllib.parse.urlsplit(url)
            headers["Origin"] = "%s://%s" % (parts.scheme, parts.netloc)
        request = urllib.request.Request(url, data=data, headers=headers)
        started = time.monotonic()
        try:
            with self.opener.open(request, timeout=self.timeout) as answer:
                status, headers, body = answer.status, answer.headers, answer.read()
        except urllib.error.HTTPError as error:
            status, headers, body = error.code, error.headers, error.read()
        self.steps.append({"method": "POST" if form is not None else "GET", "url": url, "status": status,
                           "location": headers.get("Location"), "seconds": round(time.monotonic() - started, 4)})
        return status, headers, body.decode("utf-8", "replace")

    def submit(self, page_url, form, values):
        """Submits `form` of the page at `page_url` with its hidden fields and `values`."""
        fields = {name: value for name, value, kind in form["fields"] if name and kind == "hidden"}
        fields.update(values)
        return self.request(urllib.parse.urljoin(page_url, form["action"]) or page_url, fields)

    def walk(self, url, stop, act):
        """Follows redirects and fills in the provider's pages from `url` until `stop(url)` says a
        URL is the end (it is not requested) or `act(url, status, headers, page)` returns an outcome.
        Returns (final url or None, outcome or None)."""
        form_answer = None
        for _ in range(20):
            if stop(url):
                return url, None
            status, headers, page = form_answer or self.request(url)
            form_answer = None
            if status in (301, 302, 303, 307, 308) and headers.get("Location"):
                url = urllib.parse.urljoin(url, headers["Location"])
                continue
            login = next((form for form in forms_of(page) if form["id"] == "login"), None)
            if login:
                if any(step["method"] == "POST" and "/accounts/login/" in step["url"] for step in self.steps):
                    return None, {"error": "the provider refused %s's password" % self.user, "status": status}
                form_answer = self.submit(url, login, {"username": self.user, "password": self.password})
                url = urllib.parse.urljoin(url, login["action"])
                continue
            outcome = act(url, status, headers, page)
            if isinstance(outcome, tuple):  # a form was submitted: go on from its answer
                url, form_answer = outcome
                continue
            return None, outcome
        return None, {"error": "more than 20 steps"}


def write_result(result):
    path = os.environ.get("IDP_RESULT")
    text = json.dumps(result, indent=1)
    if not path:
        print(text)
        return
    partial = path + ".partial"
    with open(partial, "w") as file:
        file.write(text)
    os.replace(partial, path)
