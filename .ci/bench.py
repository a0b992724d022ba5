# SPDX-License-Identifier: Apache-2.0
"""Times authctl against secret-tool, python keyring, argon2 + secret-tool and secretstorage.

Whole processes, A and B alternating, medians and the median of the pairwise ratios (the
machine is shared and noisy: ratios drift less than absolute times). Runs inside
`authctl sandbox` (see .ci/bench); prints a Markdown table.
"""
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

AUTHCTL = os.environ["AUTHCTL_BIN"]
BENCH = os.environ["AUTHCTL_BENCH_BIN"]
BASELINE = os.environ.get("AUTHCTL_BASELINE_BIN")
BASELINE_REV = os.environ.get("AUTHCTL_BASELINE_REV", "")
PYTHON = sys.executable
SERVICE, ACCOUNT, PASSWORD = "bench", "bench@example.org", b"correct horse battery staple"
PAIRS = int(os.environ.get("BENCH_PAIRS", "31"))
ENV = dict(os.environ, AUTHCTL_SERVICE=SERVICE)


def run(command, stdin=None, expect=0):
    """Runs a command to its end; returns (seconds, max RSS in KiB)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
    if stdin is not None:
        process.stdin.write(stdin)
        process.stdin.close()
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if expect is not None and process.returncode != expect:
        sys.exit(f"{' '.join(command)} exited {process.returncode}: {process.stderr.read().decode()}")
    return elapsed, usage.ru_maxrss


def median_ms(values):
    return statistics.median(values) * 1000


def compare(name, a, b, before_a=None):
    """Alternates a and b PAIRS times; returns a result row."""
    times_a, times_b, ratios = [], [], []
    for index in range(PAIRS):
        order = [("a", a), ("b", b)] if index % 2 == 0 else [("b", b), ("a", a)]
        measured = {}
        for label, command in order:
            if label == "a" and before_a:
                before_a()
            measured[label] = command()
        times_a.append(measured["a"])
        times_b.append(measured["b"])
        ratios.append(measured["a"] / measured["b"])
    return name, median_ms(times_a), median_ms(times_b), statistics.median(ratios)


def latency(events=100):
    """sign-in returns → the `watch` line appears, in ms."""
    watcher = subprocess.Popen([AUTHCTL, "watch", "--initial"], stdout=subprocess.PIPE, env=ENV)
    arrivals, arrived = [], threading.Condition()

    def read():
        for _ in watcher.stdout:
            with arrived:
                arrivals.append(time.perf_counter())
                arrived.notify_all()
    threading.Thread(target=read, daemon=True).start()
    with arrived:
        arrived.wait_for(lambda: len(arrivals) >= 1, timeout=10)
    samples = []
    for _ in range(events):
        run([AUTHCTL, "sign-out", "--keep-credentials"])
        with arrived:
            arrived.wait_for(lambda: len(arrivals) >= 2 + 2 * len(samples), timeout=10)
        run([AUTHCTL, "sign-in", ACCOUNT, "--password-stdin"], stdin=PASSWORD)
        returned = time.perf_counter()
        with arrived:
            arrived.wait_for(lambda: len(arrivals) >= 3 + 2 * len(samples), timeout=10)
            samples.append(arrivals[-1] - returned)
    watcher.terminate()
    samples.sort()
    return statistics.median(samples) * 1000, samples[int(len(samples) * 0.95) - 1] * 1000


def process_figures(pid):
    """(CPU seconds used so far, resident set in KiB) of a running process, from /proc."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    with open(f"/proc/{pid}/status") as status:
        rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    return cpu, rss


def sandbox_keyring_pid():
    """The gnome-keyring-daemon of this sandbox: the one on this sandbox's bus (other sandboxes
    may run beside it)."""
    bus = os.environ["DBUS_SESSION_BUS_ADDRESS"].encode()
    for pid in subprocess.run(["pgrep", "-f", "gnome-keyring-daemon"], capture_output=True, text=True).stdout.split():
        try:
            with open(f"/proc/{pid}/environ", "rb") as environ:
                if b"DBUS_SESSION_BUS_ADDRESS=" + bus in environ.read().split(b"\0"):
                    return int(pid)
        except OSError:
            continue
    sys.exit("the sandbox's gnome-keyring-daemon was not found")


def serve_figures(url, idle_seconds=int(os.environ.get("BENCH_IDLE_SECONDS", "60")), changes=1000):
    """`authctl serve`: CPU while idle (beside gnome-keyring-daemon over the same time), and its
    resident set before and after `changes` login changes and as many GetStatus calls."""
    serve = subprocess.Popen([AUTHCTL, "serve"], env=ENV, stderr=subprocess.PIPE)
    get_status = ["dbus-send", "--session", "--print-reply", "--dest=io.github.authctl", "/io/github/authctl/AuthController1",
                  "io.github.authctl.AuthController1.GetStatus", f"string:{SERVICE}"]
    deadline = time.monotonic() + 10
    while subprocess.run(get_status, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
        if time.monotonic() > deadline:
            sys.exit("authctl serve did not answer within 10 s: " + serve.stderr.read1().decode())
        time.sleep(0.05)
    keyring_pid = sandbox_keyring_pid()
    serve_before, keyring_before = process_figures(serve.pid)[0], process_figures(keyring_pid)[0]
    time.sleep(idle_seconds)
    serve_idle = (process_figures(serve.pid)[0] - serve_before) / idle_seconds * 100
    keyring_idle = (process_figures(keyring_pid)[0] - keyring_before) / idle_seconds * 100
    # Changes on a service bound to the token server: no Argon2, so 1,000 take under a minute.
    remote = dict(ENV, AUTHCTL_SERVICE="bench-remote")
    def change(index):
        if index % 2 == 0:
            subprocess.run([AUTHCTL, "sign-out", "--keep-credentials"], env=remote, check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        else:
            subprocess.run([AUTHCTL, "sign-in", ACCOUNT, "--password-stdin"], input=b"pw", env=remote, check=True,
                           stdout=subprocess.DEVNULL)
    for index in range(100):  # warm up: the first objects, caches and pools
        change(index)
        subprocess.run(get_status, stdout=subprocess.DEVNULL, check=True)
    rss_before = process_figures(serve.pid)[1]
    for index in range(changes):
        change(index)
        subprocess.run(get_status, stdout=subprocess.DEVNULL, check=True)
    rss_after = process_figures(serve.pid)[1]
    get_status_row = compare("GetStatus of `authctl serve` (`dbus-send`) vs `authctl status --json`",
                             lambda: run(get_status)[0], lambda: run([AUTHCTL, "status", "--json"])[0])
    serve.terminate()
    serve.wait(timeout=10)
    return serve_idle, keyring_idle, idle_seconds, rss_before, rss_after, changes, get_status_row


KUBE_ROUNDS = 5
KUBE_REFRESH_DELAY = 0.3  # seconds: a provider across the network, not on the same machine


def timed(command, **options):
    """Seconds `command` takes to run to its end (subprocess.run's `options`)."""
    start = time.perf_counter()
    subprocess.run(command, **options)
    return time.perf_counter() - start


def slowest_of(count, command, **options):
    """`count` runs of `command` started at once: the seconds the slowest took."""
    durations = [0.0] * count

    def one(index):
        durations[index] = timed(command, **options)
    threads = [threading.Thread(target=one, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return max(durations)


def kubectl_figures():
    """Twelve kubectl at once over an expired token against the test API server, each running
    `authctl kube-credential` as its exec plugin: how many refreshes the token server saw, and
    how long the slowest took — against one kubectl alone over an expired token, and against the
    same twelve with a fresh token (the floor: twelve kubectl processes on this machine)."""
    kubectl = os.path.abspath(".build/kubernetes-client/usr/bin/kubectl")
    folder = tempfile.mkdtemp(prefix="bench-kube-")
    tokens = subprocess.Popen([sys.executable, "Tests/IntegrationTests/Support/token_server.py"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    base = "http://127.0.0.1:%s" % tokens.stdout.readline().split()[1]
    post(base + "/_config", {"accounts": {ACCOUNT: "pw"}, "access_lifetime": 300, "refresh_delay": KUBE_REFRESH_DELAY})
    api = subprocess.Popen([".build/identity-provider-venv/bin/python3", "Tests/IntegrationTests/Support/kube_api_server.py",
                            "--dir", folder, "--userinfo", base + "/me"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    server = "https://127.0.0.1:%s" % api.stdout.readline().split()[1]
    kube = dict(ENV, AUTHCTL_SERVICE="bench-kube", HOME=folder, KUBECONFIG=os.path.join(folder, "config"),
                PATH=os.path.dirname(kubectl) + ":" + os.environ["PATH"])
    quiet = dict(env=kube, check=True, stdout=subprocess.DEVNULL)
    subprocess.run([AUTHCTL, "sign-in", ACCOUNT, "--server", base + "/oauth/token", "--password-stdin"], input=b"pw", **quiet)
    subprocess.run([kubectl, "config", "set-cluster", "bench", "--server", server, "--certificate-authority",
                    os.path.join(folder, "ca.pem")], **quiet)
    subprocess.run([AUTHCTL, "kube-credential", "setup", "bench-user", "--access-token"], **quiet)
    subprocess.run([kubectl, "config", "set-context", "bench", "--cluster", "bench", "--user", "bench-user"], **quiet)
    subprocess.run([kubectl, "config", "use-context", "bench"], **quiet)
    get = [kubectl, "get", "namespaces", "-o", "name"]
    subprocess.run(get, **quiet)  # discovery cached, as on any machine that has run kubectl before

    def refreshes():
        return sum(1 for entry in get_json(base + "/_log") if entry["endpoint"] == "refresh")

    def expired():
        # A token that lives a second, expired: the next kubectl finds a refresh due, and the
        # refresh it makes gets a token that outlives the measurement.
        post(base + "/_config", {"access_lifetime": 1})
        subprocess.run([AUTHCTL, "token", "--refresh"], **quiet)
        post(base + "/_config", {"access_lifetime": 300})
        time.sleep(1.5)

    singles, slowest, floors, counts = [], [], [], []
    for _ in range(KUBE_ROUNDS):
        expired()
        singles.append(timed(get, **quiet))
        expired()
        before = refreshes()
        slowest.append(slowest_of(12, get, **quiet))
        counts.append(refreshes() - before)
        floors.append(slowest_of(12, get, **quiet))
    api.stdin.close()
    tokens.stdin.close()
    return statistics.median(singles), statistics.median(slowest), statistics.median(floors), counts


AWS_ROLE = "arn:aws:iam::123456789012:role/bench"


def aws_figures():
    """AWS from an OpenID session: a scripted provider that signs ID tokens and needs no person
    (Tests/IntegrationTests/Support/scripted_provider.py, with its curl "browser"), and moto's STS
    (Support/clouds/sts_server.py, which records every request). Returns `aws-credential` with
    kept credentials against `secret-tool lookup` of the same item, and for twenty
    `aws sts get-caller-identity` at once, started with nothing kept, STS's requests and the
    slowest of them, against one `aws` alone with the credentials kept."""
    support = "Tests/IntegrationTests/Support"
    provider = subprocess.Popen([".build/identity-provider-venv/bin/python3", f"{support}/scripted_provider.py"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    provider_base = "http://127.0.0.1:%s" % provider.stdout.readline().split()[1]
    post(provider_base + "/_config", {"id_token": True})
    sts = subprocess.Popen([".build/clouds-venv/bin/python3", f"{support}/clouds/sts_server.py"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    sts_url = "http://127.0.0.1:%s" % sts.stdout.readline().split()[1]
    folder = tempfile.mkdtemp(prefix="bench-aws-")
    aws_env = dict(ENV, AUTHCTL_SERVICE="bench-aws", BROWSER=os.path.abspath(f"{support}/scripted_browser"), HOME=folder,
                   AWS_CONFIG_FILE=os.path.join(folder, "config"), AWS_SHARED_CREDENTIALS_FILE=os.path.join(folder, "credentials"),
                   AWS_EC2_METADATA_DISABLED="true", AWS_PAGER="")
    quiet = dict(env=aws_env, check=True, stdout=subprocess.DEVNULL)
    sign_in = [AUTHCTL, "sign-in", "--timeout", "60"]
    subprocess.run(sign_in + ["--server", provider_base + "/p", "--protocol", "oidc", "--client-id", "scripted-client"], **quiet)
    subprocess.run([AUTHCTL, "aws-credential", "setup", "bench", "--role-arn", AWS_ROLE, "--sts-endpoint", sts_url], **quiet)
    credential = [AUTHCTL, "--service", "bench-aws", "aws-credential", "--role-arn", AWS_ROLE, "--sts-endpoint", sts_url]
    subprocess.run(credential, **quiet)  # asked once; kept from here on
    lookup = ["secret-tool", "lookup", "service", "bench-aws", "aws-role", AWS_ROLE]
    kept_row = compare("`authctl aws-credential` (kept) vs `secret-tool lookup` of the same item (goal ≤ 1.0)",
                       lambda: run(credential)[0], lambda: run(lookup)[0])
    caller = ["aws", "sts", "get-caller-identity", "--profile", "bench", "--region", "us-east-1", "--endpoint-url", sts_url]

    def assume_role_requests():
        return sum(1 for entry in get_json(sts_url + "/_control/requests") if entry.get("action") == "AssumeRoleWithWebIdentity")

    alone = statistics.median(timed(caller, **quiet) for _ in range(5))
    counts, slowest = [], []
    for _ in range(3):
        # Signed out and in again: the kept credentials are gone, so the twenty find none.
        subprocess.run([AUTHCTL, "sign-out"], **quiet)
        subprocess.run(sign_in, **quiet)
        before = assume_role_requests()
        slowest.append(slowest_of(20, caller, **quiet))
        counts.append(assume_role_requests() - before)
    provider.stdin.close()
    sts.stdin.close()
    return kept_row, alone, statistics.median(slowest), counts


def post(url, document):
    urllib.request.urlopen(urllib.request.Request(url, data=json.dumps(document).encode()))


def get_json(url):
    return json.load(urllib.request.urlopen(url))


def main():
    # One enrolled account, signed in, as the item everybody looks up.
    run([AUTHCTL, "sign-in", ACCOUNT, "--name", "Bench", "--password-stdin"], stdin=PASSWORD)
    run([PYTHON, "-c", f"import keyring; keyring.set_password({SERVICE!r}, {ACCOUNT!r}, 'x')"])
    # 1,000 accounts under another service, for the listings.
    run([PYTHON, "-c", """
import secretstorage
collection = secretstorage.get_default_collection(secretstorage.dbus_init())
for i in range(1000):
    collection.create_item(f"bulk {i}", {"service": "bulk", "account": f"user{i:04d}@example.org"}, b"x")
"""])
    # A service bound to the test token server, signed in, with a token that stays fresh.
    server = subprocess.Popen([sys.executable, "Tests/IntegrationTests/Support/token_server.py"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    url = "http://127.0.0.1:%s/oauth/token" % server.stdout.readline().split()[1]
    remote = dict(ENV, AUTHCTL_SERVICE="bench-remote")
    subprocess.run([PYTHON, "-c", f"""
import urllib.request
urllib.request.urlopen(urllib.request.Request({url.replace('/oauth/token', '/_config')!r}, data=b'{{"accounts": {{"{ACCOUNT}": "pw"}}, "access_lifetime": 86400}}'))
"""], check=True)
    subprocess.run([AUTHCTL, "sign-in", ACCOUNT, "--server", url, "--password-stdin"], input=b"pw", env=remote, check=True,
                   stdout=subprocess.DEVNULL)
    token = lambda: run([AUTHCTL, "--service", "bench-remote", "token"])[0]
    status = lambda: run([AUTHCTL, "status"])[0]
    # git's credential helper for the token server's host, its git configuration a throwaway file.
    host = url.split("/")[2]
    git_config = os.path.join(os.environ.get("XDG_RUNTIME_DIR", "/tmp"), "bench-gitconfig")
    subprocess.run([AUTHCTL, "git-credential", "setup", "http://" + host], env=dict(remote, GIT_CONFIG_GLOBAL=git_config), check=True,
                   stdout=subprocess.DEVNULL)
    git_request = f"protocol=http\nhost={host}\n\n".encode()
    answer = subprocess.run([AUTHCTL, "--service", "bench-remote", "git-credential", "get"], input=git_request, env=ENV,
                            capture_output=True, check=True).stdout
    assert b"\npassword=" in answer, answer
    git_credential = lambda: run([AUTHCTL, "--service", "bench-remote", "git-credential", "get"], stdin=git_request)[0]
    # kubectl's exec plugin (the access token: the token server issues no ID token), and the Docker
    # credential helper under its own name, for the token server's host as a registry.
    kube_credential = lambda: run([AUTHCTL, "--service", "bench-remote", "kube-credential", "--access-token"])[0]
    runtime = os.environ.get("XDG_RUNTIME_DIR", "/tmp")
    docker_helper = os.path.join(runtime, "docker-credential-authctl")
    if not os.path.lexists(docker_helper):
        os.symlink(AUTHCTL, docker_helper)
    subprocess.run([AUTHCTL, "docker-credential", "setup", host, "--config", os.path.join(runtime, "bench-docker.json")], env=remote,
                   check=True, stdout=subprocess.DEVNULL)
    docker_credential = lambda: run([docker_helper, "get"], stdin=host.encode())[0]
    # The floor: the one SearchItems call `status` needs, made by libdbus's own client.
    search_items = ["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.secrets", "/org/freedesktop/secrets",
                    "org.freedesktop.Secret.Service.SearchItems", f"dict:string:string:service,{SERVICE},account,{ACCOUNT}"]
    rows = [
        compare("`authctl status` vs `dbus-send` SearchItems (the floor; goal ≤ 2.0)", status,
                lambda: run(search_items)[0]),
        compare("`authctl status` vs `secret-tool lookup` (goal ≤ 0.8)", status,
                lambda: run(["secret-tool", "lookup", "service", SERVICE, "account", ACCOUNT])[0]),
        compare("`authctl token` (fresh, no request) vs `secret-tool lookup` of the same item (goal ≤ 0.9)", token,
                lambda: run(["secret-tool", "lookup", "service", "bench-remote", "account", ACCOUNT, "server", url])[0]),
        compare("`authctl git-credential get` (fresh) vs `secret-tool lookup` of the same item (goal ≤ 1.0)", git_credential,
                lambda: run(["secret-tool", "lookup", "service", "bench-remote", "account", ACCOUNT, "server", url])[0]),
        compare("`authctl kube-credential` (fresh) vs `secret-tool lookup` of the same item (goal ≤ 1.0)", kube_credential,
                lambda: run(["secret-tool", "lookup", "service", "bench-remote", "account", ACCOUNT, "server", url])[0]),
        compare("`docker-credential-authctl get` (fresh) vs `secret-tool lookup` of the same item (goal ≤ 1.0)", docker_credential,
                lambda: run(["secret-tool", "lookup", "service", "bench-remote", "account", ACCOUNT, "server", url])[0]),
    ]
    if BASELINE:
        # The same commands from an earlier build (`make bench BASELINE=REV`), on the same keyring.
        rows += [
            compare(f"`authctl status` now vs at {BASELINE_REV}", status, lambda: run([BASELINE, "status"])[0]),
            compare(f"`authctl token` (fresh) now vs at {BASELINE_REV}", token,
                    lambda: run([BASELINE, "--service", "bench-remote", "token"])[0]),
        ]
    rows += [
        compare("`authctl status` vs `python3 -m keyring get`", status,
                lambda: run([PYTHON, "-m", "keyring", "get", SERVICE, ACCOUNT])[0]),
        compare("`authctl sign-in` (enrolled) vs `argon2` + `secret-tool lookup`",
                lambda: run([AUTHCTL, "sign-in", ACCOUNT, "--password-stdin"], stdin=PASSWORD)[0],
                lambda: run(["sh", "-c", "printf %s 'correct horse battery staple' | argon2 saltsaltsaltsalt -id -t 3 -k 65536 -p 4 -l 32 -e >/dev/null"
                                         f" && secret-tool lookup service {SERVICE} account {ACCOUNT} >/dev/null"])[0],
                before_a=lambda: run([AUTHCTL, "sign-out", "--keep-credentials"])),
        compare("`authctl accounts` (1,000) vs Python `secretstorage` listing",
                lambda: run([AUTHCTL, "--service", "bulk", "accounts"])[0],
                lambda: run([PYTHON, "-c", "import secretstorage; c = secretstorage.get_default_collection(secretstorage.dbus_init());"
                                           " [i.get_attributes()['account'] for i in c.search_items({'service': 'bulk'})]"])[0]),
    ]
    serve_idle, keyring_idle, idle_seconds, serve_rss_before, serve_rss_after, changes, get_status_row = serve_figures(url)
    rows.append(get_status_row)
    server.stdin.close()
    run([AUTHCTL, "sign-in", ACCOUNT, "--password-stdin"], stdin=PASSWORD)
    median_latency, p95_latency = latency()
    rss = {
        "authctl status": statistics.median(run([AUTHCTL, "status"])[1] for _ in range(5)),
        "secret-tool lookup": statistics.median(run(["secret-tool", "lookup", "service", SERVICE, "account", ACCOUNT])[1] for _ in range(5)),
        "authctl sign-in": statistics.median(run([AUTHCTL, "sign-in", ACCOUNT, "--password-stdin"], stdin=PASSWORD)[1] for _ in range(5)),
    }
    in_process = int(subprocess.run([BENCH, SERVICE, "3"], env=ENV, capture_output=True, text=True, check=True).stdout)
    python_loop = int(subprocess.run([PYTHON, "-c", f"""
import secretstorage, time
connection = secretstorage.dbus_init()
collection = secretstorage.get_default_collection(connection)
start, checks = time.perf_counter(), 0
while time.perf_counter() - start < 3:
    assert next(collection.search_items({{"service": {SERVICE!r}, "account": {ACCOUNT!r}}}), None) is not None
    checks += 1
print(int(checks / (time.perf_counter() - start)))
"""], env=ENV, capture_output=True, text=True, check=True).stdout)

    # Last: its threads and answers grow this process, and a child forked from it starts with
    # that resident set (which the peak memory figures above would count).
    single_refresh, slowest_of_twelve, fresh_twelve, refreshes_of_twelve = kubectl_figures()
    aws_kept_row, aws_alone, aws_slowest_of_twenty, sts_requests_of_twenty = aws_figures()
    rows.append(aws_kept_row)

    print(f"authctl benchmark, {time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores, "
          f"{platform.platform()}; {PAIRS} alternating pairs each\n")
    print("| comparison (A vs B) | A median | B median | median A/B |")
    print("|---|---:|---:|---:|")
    for name, a, b, ratio in rows:
        print(f"| {name} | {a:.1f} ms | {b:.1f} ms | {ratio:.2f} |")
    print(f"\n| event latency (sign-in returns → `watch` line), 100 events | median {median_latency:.2f} ms | p95 {p95_latency:.2f} ms |")
    print("|---|---:|---:|")
    print(f"\n| twelve `kubectl get` at once over an expired token (refresh answered in {KUBE_REFRESH_DELAY} s), {KUBE_ROUNDS} rounds | |")
    print("|---|---:|")
    print(f"| one `kubectl get` alone over an expired token (median) | {single_refresh * 1000:.0f} ms |")
    print(f"| the slowest of the twelve (median; goal ≤ 2× the one alone) | {slowest_of_twelve * 1000:.0f} ms "
          f"({slowest_of_twelve / single_refresh:.2f}×) |")
    print(f"| the slowest of twelve with a fresh token (no refresh: twelve kubectl on this machine) | {fresh_twelve * 1000:.0f} ms |")
    print(f"| refresh requests at the server for each twelve (goal: 1) | {', '.join(map(str, refreshes_of_twelve))} |")
    print("\n| twenty `aws sts get-caller-identity` at once, nothing kept (`credential_process` = `authctl aws-credential`), 3 rounds | |")
    print("|---|---:|")
    print(f"| one `aws` alone, credentials kept (median) | {aws_alone * 1000:.0f} ms |")
    print(f"| the slowest of the twenty (median) | {aws_slowest_of_twenty * 1000:.0f} ms |")
    print(f"| AssumeRoleWithWebIdentity requests at STS for each twenty (goal: 1) | {', '.join(map(str, sts_requests_of_twenty))} |")
    print("\n| release binary | size |\n|---|---:|")
    print(f"| `authctl` (goal ≤ 30 MB) | {os.path.getsize(AUTHCTL) / 1e6:.1f} MB |")
    if BASELINE:
        print(f"| `authctl` at {BASELINE_REV} | {os.path.getsize(BASELINE) / 1e6:.1f} MB |")
    print("\n| peak memory (max RSS) | |\n|---|---:|")
    for name, kib in rss.items():
        print(f"| `{name}` | {kib / 1024:.1f} MiB |")
    print(f"\n| `authctl serve` | |\n|---|---:|")
    print(f"| CPU while idle for {idle_seconds} s (`gnome-keyring-daemon` over the same time: {keyring_idle:.2f} %) | {serve_idle:.2f} % |")
    print(f"| resident set after 100 changes and GetStatus calls → after {changes} more | "
          f"{serve_rss_before / 1024:.1f} → {serve_rss_after / 1024:.1f} MiB |")
    print("\n| in-process `isSignedIn` checks per second, warm connection | |\n|---|---:|")
    print(f"| AuthController (Swift) | {in_process} |")
    print(f"| Python `secretstorage` search loop | {python_loop} |")


if __name__ == "__main__":
    main()
