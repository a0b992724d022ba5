# SPDX-License-Identifier: Apache-2.0
"""The person's browser, for a client that opens one with the authorization URL (BROWSER=browser-stand-in):
signs in at the test identity provider, approves or refuses at its consent page, and follows the
redirect to the client's loopback callback, whose answer goes to IDP_RESULT as JSON:

  {"decision", "callbackURL", "status", "contentType", "body", "steps": [...], "error"?}

Settings as person.py lists them, plus IDP_ENGINE: http (default, Python's HTTP client) or
chromium (headless Chromium driven by Selenium, through /usr/bin/chromedriver), and for the http
engine IDP_CALLBACK_SET, IDP_CALLBACK_DROP (see `edited`) and IDP_CALLBACK_AGAIN (how many more
times the callback is fetched; their answers go to "again"); IDP_CALLBACK_FETCH=no stops at the
callback's address, written as "callbackURL" but never fetched, as for a person who pastes it.
It runs without a terminal and detached; it writes nothing a client would need to read.
"""
import os
import sys
import time
import traceback
import urllib.parse

import person


def redirect_uri_of(authorization_url):
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(authorization_url).query)
    return query.get("redirect_uri", [""])[0]


def is_callback(url, redirect_uri):
    """Whether `url` goes to the client's redirect URI (its query aside)."""
    return bool(redirect_uri) and url.split("?", 1)[0] == redirect_uri.split("?", 1)[0]


def edited(callback):
    """The callback URL as IDP_CALLBACK_SET (a query string: each parameter replaced or added) and
    IDP_CALLBACK_DROP (names, comma-separated: removed) change it: a provider, or an attacker,
    that answers otherwise than this one does."""
    drop = {name for name in (os.environ.get("IDP_CALLBACK_DROP") or "").split(",") if name}
    changes = urllib.parse.parse_qsl(os.environ.get("IDP_CALLBACK_SET") or "", keep_blank_values=True)
    if not drop and not changes:
        return callback
    parts = urllib.parse.urlsplit(callback)
    names = {name for name, _ in changes}
    query = [(name, value) for name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
             if name not in drop and name not in names] + changes
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))


def over_http(authorization_url):
    who = person.Person()
    redirect_uri = redirect_uri_of(authorization_url)
    result = {"engine": "http", "decision": who.decision, "user": who.user}

    def consent(url, status, headers, page):
        form = next((form for form in person.forms_of(page) if form["id"] == "authorizationForm"), None)
        if form is None:
            return {"error": "no consent form", "status": status, "body": page[:2000]}
        if who.decision == "ignore":
            return {"ignored": True}
        values = {"allow": "Authorize"} if who.decision == "approve" else {}
        return url, who.submit(url, form, values)

    callback, outcome = who.walk(authorization_url, lambda url: is_callback(url, redirect_uri), consent)
    result.update(outcome or {})
    if callback:
        callback = edited(callback)
        result["callbackURL"] = callback
        if os.environ.get("IDP_CALLBACK_FETCH") == "no":
            # The person copies the address instead (a browser that cannot reach the listener).
            result["steps"] = who.steps
            return result
        try:
            status, headers, body = who.request(callback)
            result.update(status=status, contentType=headers.get("Content-Type"), body=body)
            for _ in range(int(os.environ.get("IDP_CALLBACK_AGAIN") or 0)):
                status, headers, body = who.request(callback)
                result.setdefault("again", []).append({"status": status, "body": body})
        except OSError as error:  # nobody listens there (any more)
            result["error"] = "the callback could not be fetched: %s" % error
    result["steps"] = who.steps
    return result


def in_chromium(authorization_url):
    from selenium import webdriver
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    import shutil
    import tempfile

    who = person.Person()
    redirect_uri = redirect_uri_of(authorization_url)
    result = {"engine": "chromium", "decision": who.decision, "user": who.user}
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    profile = tempfile.mkdtemp(prefix="idp-chromium-")
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--no-first-run", "--disable-extensions", "--user-data-dir=" + profile):
        options.add_argument(argument)
    # The Debian chromedriver, given by path, so Selenium Manager never looks for one to download.
    driver = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)
    wait = WebDriverWait(driver, who.timeout)
    try:
        driver.set_page_load_timeout(who.timeout)
        driver.get(authorization_url)
        wait.until(lambda d: d.find_elements(By.ID, "login") or d.find_elements(By.ID, "authorizationForm"))
        if driver.find_elements(By.ID, "login"):
            driver.find_element(By.ID, "id_username").send_keys(who.user)
            driver.find_element(By.ID, "id_password").send_keys(who.password)
            driver.find_element(By.ID, "sign-in").click()
            wait.until(lambda d: d.find_elements(By.ID, "authorizationForm") or d.find_elements(By.ID, "error"))
            if driver.find_elements(By.ID, "error"):
                result["error"] = "the provider refused %s's password" % who.user
                return result
        if who.decision == "ignore":
            result["ignored"] = True
            return result
        if who.decision == "approve":
            driver.find_element(By.CSS_SELECTOR, "#authorizationForm input[name=allow]").click()
        else:
            driver.find_element(By.CSS_SELECTOR, "#authorizationForm input[type=submit]:not([name])").click()
        try:
            wait.until(lambda d: is_callback(d.current_url, redirect_uri)
                       and d.execute_script("return document.readyState") == "complete")
        except WebDriverException as error:
            result["error"] = "no callback page: %s" % str(error).splitlines()[0]
        result["callbackURL"] = driver.current_url
        navigation = driver.execute_script(
            "const n = performance.getEntriesByType('navigation')[0];"
            "return {status: n ? n.responseStatus : null, contentType: document.contentType};")
        result.update(status=navigation.get("status"), contentType=navigation.get("contentType"),
                      body=driver.page_source)
        return result
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def main():
    started = time.monotonic()
    url = sys.argv[1] if len(sys.argv) > 1 else ""
    engine = os.environ.get("IDP_ENGINE") or "http"
    try:
        result = in_chromium(url) if engine == "chromium" else over_http(url)
    except Exception as error:  # the outcome file says what went wrong; nobody reads stderr
        result = {"engine": engine, "error": "%s: %s" % (type(error).__name__, error), "trace": traceback.format_exc()}
    result["authorizationURL"] = url
    result["seconds"] = round(time.monotonic() - started, 3)
    person.write_result(result)


if __name__ == "__main__":
    main()
