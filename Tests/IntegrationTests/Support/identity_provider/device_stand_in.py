# SPDX-License-Identifier: Apache-2.0
"""The person on their other device, for the device flow:

  device_stand_in.py VERIFICATION_URI [USER_CODE]

opens the verification page, signs in, enters USER_CODE (without it, the code the page already
holds, as verification_uri_complete fills it in), and approves or refuses as IDP_DECISION says
(approve, deny; ignore stops before entering the code). Settings as person.py lists them; the
outcome, {"decision", "status", "error"?, "steps"}, goes to IDP_RESULT or else to stdout.
Exits 0 when the provider took the decision, 1 otherwise.
"""
import sys
import time
import traceback

import person


def main():
    started = time.monotonic()
    verification_uri = sys.argv[1]
    user_code = sys.argv[2] if len(sys.argv) > 2 else None
    who = person.Person()
    result = {"decision": who.decision, "user": who.user}

    def enter_and_decide(url, status, headers, page):
        forms = person.forms_of(page)
        if "/o/device-grant-status/" in url:
            return {"status": page.split("<h1>", 1)[-1].split("</h1>", 1)[0].strip() if "<h1>" in page else status}
        code_form = next((form for form in forms if any(name == "user_code" for name, _, _ in form["fields"])), None)
        if code_form:
            if "errorlist" in page:
                return {"error": "the provider refused the code", "page": page[:2000]}
            if who.decision == "ignore":
                return {"ignored": True}
            code = user_code or next(value for name, value, _ in code_form["fields"] if name == "user_code")
            return url, who.submit(url, code_form, {"user_code": code})
        decide_form = next((form for form in forms if any(name == "action" for name, _, _ in form["fields"])), None)
        if decide_form:
            return url, who.submit(url, decide_form, {"action": "accept" if who.decision == "approve" else "deny"})
        return {"error": "an unexpected page (HTTP %s)" % status, "page": page[:2000]}

    try:
        _, outcome = who.walk(verification_uri, lambda url: False, enter_and_decide)
        result.update(outcome or {})
    except Exception as error:
        result.update(error="%s: %s" % (type(error).__name__, error), trace=traceback.format_exc())
    result["steps"] = who.steps
    result["seconds"] = round(time.monotonic() - started, 3)
    person.write_result(result)
    return 0 if "error" not in result and "ignored" not in result else 1


if __name__ == "__main__":
    sys.exit(main())
