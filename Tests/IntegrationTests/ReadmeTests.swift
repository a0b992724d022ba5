// SPDX-License-Identifier: Apache-2.0
import AuthController
import DesktopSandbox
import Foundation
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The fenced code blocks of README.md, each with the verdict of the `<!-- readme-test: … -->`
/// comment on the line before it:
/// - `shell NAME`: run with `/bin/sh -e` in a throwaway session (private bus and keyring) with
///   the default service, `authctl` on PATH; the test named NAME in ``ReadmeTests`` says what is
///   substituted (a remote server by the local token server, say) and checks what it printed;
/// - `listeners NAME`: each command line is a listener, started on its own;
/// - `python NAME`: run with Debian's `/usr/bin/python3` (python3-gi);
/// - `python-serve NAME`: as `python`, with `authctl serve` running (reserved for the section on
///   `serve`'s objects);
/// - `layout`: a file tree whose paths must exist, listing every folder of Sources/ and of the core;
/// - `not run: REASON`: the reason says how it is exercised instead.
/// A new block needs a verdict, and a NAME needs a test here (``ReadmeTests/handled``).
struct ReadmeBlock {
    var language: String
    var text: String
    var verdict: String
    /// The line of the opening fence (1-based).
    var line: Int

    var kind: String { String(verdict.prefix { $0 != " " && $0 != ":" }) }
    var name: String { verdict.split(separator: " ").dropFirst().first.map(String.init) ?? "" }

    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func all() throws -> [ReadmeBlock] {
        let lines = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
            .split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var blocks: [ReadmeBlock] = []
        var index = 0
        while index < lines.count {
            guard lines[index].hasPrefix("```") else {
                index += 1
                continue
            }
            let opening = index
            let language = String(lines[index].dropFirst(3)).trimmingCharacters(in: .whitespaces)
            index += 1
            var body: [String] = []
            while index < lines.count, !lines[index].hasPrefix("```") {
                body.append(lines[index])
                index += 1
            }
            index += 1
            let before = opening > 0 ? lines[opening - 1] : ""
            var verdict = ""
            if before.hasPrefix("<!-- readme-test:"), before.hasSuffix("-->") {
                verdict = before.dropFirst("<!-- readme-test:".count).dropLast(3).trimmingCharacters(in: .whitespaces)
            }
            blocks.append(ReadmeBlock(language: language, text: body.joined(separator: "\n") + "\n", verdict: verdict, line: opening + 1))
        }
        return blocks
    }

    static func named(_ name: String) throws -> ReadmeBlock {
        let found = try all().filter { $0.name == name && $0.kind != "not" }
        return try #require(found.count == 1 ? found.first : nil, "README.md: expected one block marked `readme-test: … \(name)`, found \(found.count)")
    }

    /// The text with each `(README text, replacement)` applied; each README text must be there, so
    /// a substitution never goes stale in silence.
    func substituting(_ pairs: [(String, String)]) -> String {
        var result = text
        for (original, replacement) in pairs {
            #expect(result.contains(original), "README.md line \(line): the block no longer contains \(original)")
            result = result.replacingOccurrences(of: original, with: replacement)
        }
        return result
    }
}

/// A throwaway desktop session for one snippet: its own bus and keyring, so the snippet can use
/// the default service exactly as written; `authctl` and `stubs` on PATH; a work folder as the
/// current directory.
struct SnippetSession {
    let sandbox: DesktopSandbox
    var scenario: Scenario
    let folder: URL

    /// - Parameter activating: the bus starts the built `authctl serve` on demand, as it starts an
    ///   installed one; the session's commands then use the sandbox's settings folder, which the
    ///   started `serve` inherits from the bus daemon.
    static func start(activating: Bool = false) async throws -> SnippetSession {
        var serviceDirectories: [String] = []
        if activating {
            let services = FileManager.default.temporaryDirectory.appendingPathComponent("authctl-services-" + UUID().uuidString.lowercased())
            try FileManager.default.createDirectory(at: services, withIntermediateDirectories: true)
            try "[D-BUS Service]\nName=io.github.authctl\nExec=\(Scenario.binary) serve\n"
                .write(to: services.appendingPathComponent("io.github.authctl.service"), atomically: true, encoding: .utf8)
            serviceDirectories = [services.path]
        }
        let sandbox = try await DesktopSandbox.started(serviceDirectories: serviceDirectories)
        var scenario = try await Scenario(sandbox: sandbox, service: ServiceName.standard.rawValue)
        if activating { scenario.extraEnvironment["XDG_CONFIG_HOME"] = sandbox.environment["XDG_CONFIG_HOME"] }
        let folder = URL(fileURLWithPath: sandbox.directory).appendingPathComponent("readme-" + UUID().uuidString.lowercased())
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("stubs"), withIntermediateDirectories: true)
        let binaries = URL(fileURLWithPath: Scenario.binary).deletingLastPathComponent().path
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        scenario.extraEnvironment["PATH"] = "\(folder.path)/stubs:\(binaries):\(path)"
        scenario.extraEnvironment["password"] = "correct horse battery staple"
        return SnippetSession(sandbox: sandbox, scenario: scenario, folder: folder)
    }

    func stop() { sandbox.stop() }

    /// Writes an executable file into the work folder (`stubs/NAME` puts a command on PATH).
    func executable(_ relativePath: String, _ text: String) throws {
        let path = folder.appendingPathComponent(relativePath).path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o755)
    }

    /// Runs `script` with `/bin/sh -e` in the work folder.
    func shell(_ script: String, timeout: Double = 120) async throws -> Run {
        let file = folder.appendingPathComponent("snippet-\(UUID().uuidString).sh")
        try script.write(to: file, atomically: true, encoding: .utf8)
        return try await scenario.shell("cd '\(folder.path)' && exec /bin/sh -e '\(file.path)'", timeout: timeout)
    }

    func signIn(_ account: String) async throws {
        let run = try await scenario.authctl(["sign-in", account, "--password-stdin"], input: Array("correct horse battery staple".utf8))
        try #require(run.status == 0, "\(run)")
    }
}

/// Debian's Python, for which python3-gi is built (a `python3` earlier on PATH may be another).
let debianPython = "/usr/bin/python3"

@Suite("README.md: every snippet is run")
struct ReadmeTests {
    /// The NAMEs that have a test below. A block marked with another NAME fails `verdicts`.
    static let handled: Set<String> = ["use", "scripts", "reacting", "listener", "serve-listener", "remote", "sandbox"]
    static let kinds: Set<String> = ["shell", "listeners", "python", "python-serve", "layout", "not"]

    @Test("every block has a verdict, and every named one a test")
    func verdicts() throws {
        let blocks = try ReadmeBlock.all()
        #expect(blocks.count >= 10)
        var names: [String] = []
        for block in blocks {
            #expect(Self.kinds.contains(block.kind),
                    "README.md line \(block.line): a block without a verdict: put `<!-- readme-test: shell NAME -->` (or python, listeners, layout, `not run: WHY`) on the line before it")
            if block.kind == "not" {
                #expect(block.verdict.hasPrefix("not run: "), "README.md line \(block.line): `not run:` must say how the block is exercised instead")
                #expect(block.verdict.count > "not run: ".count + 10, "README.md line \(block.line): `not run:` must say how the block is exercised instead")
            } else if block.kind != "layout" {
                #expect(Self.handled.contains(block.name), "README.md line \(block.line): no test in ReadmeTests runs the block named '\(block.name)'")
                names.append(block.name)
            }
        }
        #expect(Set(names) == Self.handled, "README.md names \(names.sorted()), ReadmeTests runs \(Self.handled.sorted())")
        #expect(names.count == Set(names).count, "README.md names \(names.sorted()), ReadmeTests runs \(Self.handled.sorted())")
    }

    @Test("Use: sign-in, status, whoami, verify, accounts, sign-out, forget")
    func use() async throws {
        let session = try await SnippetSession.start()
        defer { session.stop() }
        // `verify` asks at the terminal; the test has none, so it gives the password on stdin.
        let script = try ReadmeBlock.named("use").substituting([
            ("authctl verify ", #"printf '%s' "$password" | authctl verify --password-stdin"#),
        ])
        let run = try await session.shell(script)
        #expect(run.status == 0, "\(run)")
        let lines = run.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("Signed in to io.github.authctl as alice@example.org (Alice) since ") }, "\(run)")
        #expect(lines.contains("alice@example.org"), "\(run)")
        #expect(lines.contains("* alice@example.org"), "\(run)")
        let json = try #require(lines.first { $0.hasPrefix("{") })
        let status = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        #expect(status?["user"] as? String == "alice@example.org", "\(json)")
        #expect(status?["signedIn"] as? Bool == true, "\(json)")
        // sign-out deleted the hash: nobody is signed in and no account is left.
        #expect(try await session.scenario.authctl("status").status == 1)
        #expect(try await session.scenario.authctl("accounts").stdout == "")
    }

    @Test("In scripts: status --quiet and status --json | jq")
    func scripts() async throws {
        let session = try await SnippetSession.start()
        defer { session.stop() }
        try await session.signIn("alice@example.org")
        let run = try await session.shell(try ReadmeBlock.named("scripts").text)
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout == "signed in as alice@example.org\nalice@example.org\n", "\(run)")
    }

    @Test("Reacting to logins: each listener hears a sign-in")
    func reacting() async throws {
        let session = try await SnippetSession.start()
        defer { session.stop() }
        // notify-send needs a notification daemon, which the private bus has not: a stub records
        // the arguments `--exec` gave it (what the snippet is about), one line per call.
        let notifications = session.folder.appendingPathComponent("notifications").path
        try session.executable("stubs/notify-send", "#!/bin/sh\nprintf '%s|' \"$@\" >>'\(notifications)'\necho >>'\(notifications)'\n")
        let commands = try ReadmeBlock.named("reacting").text.split(separator: "\n")
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty && !$0.hasPrefix("#") }
        try #require(commands.count == 4, "\(commands)")
        var spawned: [Spawned] = []
        for command in commands { spawned.append(try await session.scenario.startShell("exec " + command)) }
        let listeners = spawned
        let notified = { (try? String(contentsOfFile: notifications, encoding: .utf8)) ?? "" }
        let execHeard = { notified().split(separator: "\n").contains("authctl|alice@example.org signed-in=1 (sign-in)|") }
        let jsonHeard = { listeners[1].stdout.split(separator: "\n").dropFirst().contains { $0.contains(#""signedIn":true"#) } }
        let countHeard = { listeners[2].stdout.contains("\n") }
        let monitorHeard = { listeners[3].stdout.contains(#"string "signed-in""#) }
        // Each listener prints or runs nothing until it is subscribed, so alice signs in and out
        // until all four heard a sign-in (one that missed the first hears a later one). At once,
        // not behind the suite's limit on processes running together: `watch --timeout 30` is
        // counting, and a loaded suite kept these commands waiting for most of it.
        _ = try await eventually(within: .seconds(30), pollingEvery: .zero) {
            if execHeard() && jsonHeard() && countHeard() && monitorHeard() { return true }
            try await session.scenario.authctlNow("sign-in", "alice@example.org", "--password-stdin",
                                                  stdin: "correct horse battery staple").expect(0)
            _ = try await session.scenario.authctlNow("sign-out", "--keep-credentials")
            return false
        }
        #expect(execHeard(), "notify-send got: \(notified())")
        let json = listeners[1].stdout.split(separator: "\n").map(String.init)
        #expect(json.first?.contains(#""reason":"initial""#) == true, "\(json)")
        #expect(jsonHeard(), "\(json)")
        #expect(monitorHeard(), "dbus-monitor: \(listeners[3].stdout)")
        #expect(listeners[3].stdout.contains(#"string "io.github.authctl""#), "dbus-monitor: \(listeners[3].stdout)")
        let once = await listeners[2].wait(timeout: 10)
        #expect(once.status == 0, "watch --count 1: \(once)")
        #expect(once.stdout.split(separator: "\n").count == 1, "watch --count 1: \(once)")
        for listener in [listeners[0], listeners[1], listeners[3]] { listener.signal(SIGTERM) }
        for (index, listener) in [listeners[0], listeners[1]].enumerated() {
            let run = await listener.wait(timeout: 10)
            #expect(run.status == 0, "\(commands[index]): \(run)")
        }
        _ = await listeners[3].wait(timeout: 10)
    }

    @Test("The Python listener prints each event at once to a pipe, and survives a signal without reason")
    func listener() async throws {
        let session = try await SnippetSession.start()
        defer { session.stop() }
        let script = session.folder.appendingPathComponent("listener.py")
        try ReadmeBlock.named("listener").text.write(to: script, atomically: true, encoding: .utf8)
        // Python's defaults, as under a systemd unit: no PYTHONUNBUFFERED from this machine's
        // environment, which would hide the block buffering of a pipe.
        let environment = session.scenario.environment.filter { !$0.key.hasPrefix("PYTHON") }
        let python = try await Spawned(debianPython, [script.path], input: nil, environment: environment, leadsProcessGroup: true,
                                       pipesOutput: true)
        defer { python.signal(SIGKILL) }

        // A forged signal, as any peer may send: no reason, no sequence. Sent until the listener,
        // once subscribed, prints its line.
        _ = try await eventually(within: .seconds(30), pollingEvery: .zero) {
            if python.stdout.contains("mallory") || python.hasEnded { return true }
            let forged = try await session.scenario.gdbus(
                "emit", "--session", "--object-path", "/io/github/authctl/AuthController1",
                "--signal", "io.github.authctl.AuthController1.LoginStatusChanged",
                "'io.github.authctl'", "'signed-in'", "'mallory'", "{'name': <'Mallory'>}")
            try #require(forged.status == 0, "\(forged)")
            return await python.waitForOutput(timeout: 0.5) { $0.contains("mallory") }
        }
        #expect(python.stdout.split(separator: "\n").contains("signed-in mallory None None"), "stdout: \(python.stdout)\nstderr: \(python.stderr)")
        // A real event from `authctl sign-in`.
        try await session.signIn("alice@example.org")
        let arrived = await python.waitForOutput(timeout: 30) { $0.contains("signed-in alice@example.org sign-in 1\n") }
        #expect(arrived, "stdout: \(python.stdout)\nstderr: \(python.stderr)")
        #expect(!python.hasEnded, "the listener stopped or complained: \(python.stderr)")
        #expect(python.stderr.isEmpty, "the listener stopped or complained: \(python.stderr)")
    }

    @Test("The serve listener starts `authctl serve` by activation, prints the state, and follows each change at once to a pipe")
    func serveListener() async throws {
        let session = try await SnippetSession.start(activating: true)
        defer { session.stop() }
        try await session.signIn("alice@example.org")
        let script = session.folder.appendingPathComponent("serve-listener.py")
        try ReadmeBlock.named("serve-listener").text.write(to: script, atomically: true, encoding: .utf8)
        let environment = session.scenario.environment.filter { !$0.key.hasPrefix("PYTHON") }
        let python = try await Spawned(debianPython, [script.path], input: nil, environment: environment, leadsProcessGroup: true,
                                       pipesOutput: true)
        defer { python.signal(SIGKILL) }
        #expect(await python.waitForOutput(timeout: 30) { $0 == "signed in as alice@example.org\n" }, "stdout: \(python.stdout)\nstderr: \(python.stderr)")
        // Nobody started serve but the listener's proxy: the bus did, on its call.
        let owner = try await session.scenario.gdbus("call", "--session", "--dest", "org.freedesktop.DBus", "--object-path", "/org/freedesktop/DBus",
                                                     "--method", "org.freedesktop.DBus.NameHasOwner", "io.github.authctl")
        #expect(owner.stdout.contains("true"), "\(owner)")
        try await session.scenario.authctl("sign-out").expect(0)
        #expect(await python.waitForOutput(timeout: 30) { $0.hasSuffix("signed out\n") }, "stdout: \(python.stdout)\nstderr: \(python.stderr)")
        try await session.signIn("bob@example.org")
        #expect(await python.waitForOutput(timeout: 30) { $0.hasSuffix("signed in as bob@example.org\n") }, "stdout: \(python.stdout)\nstderr: \(python.stderr)")
        #expect(!python.hasEnded, "the listener stopped or complained: \(python.stderr)")
        #expect(python.stderr.isEmpty, "the listener stopped or complained: \(python.stderr)")
    }

    @Test("Remote accounts: both protocols and curl, against the local token server")
    func remote() async throws {
        let session = try await SnippetSession.start()
        defer { session.stop() }
        // sso.example.org is played by one local token server (which also serves /me, as a
        // resource server that trusts its tokens), api.example.org/v1 by another: one knows
        // alice, at the other she registers.
        let sso = try await TokenServer()
        defer { sso.stop() }
        try sso.configure(["accounts": ["alice": "correct horse battery staple"]])
        let api = try await TokenServer()
        defer { api.stop() }
        let script = try ReadmeBlock.named("remote").substituting([
            ("https://sso.example.org/realms/corp/protocol/openid-connect/token", sso.oauth2),
            ("https://sso.example.org/realms/corp/protocol/openid-connect/revoke", sso.revoke),
            ("https://api.example.org/v1", api.json),
            ("https://api.example.org/me", "http://127.0.0.1:\(sso.port)/me"),
            // At a terminal `sign-in` asks for the password; the test has none, so stdin gives it.
            ("authctl --service app sign-in", #"printf '%s' "$password" | authctl --service app sign-in"#),
            ("--register\n", "--register --password-stdin\n"),
        ])
        let run = try await session.shell(script)
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.contains(#""authorized": true"#), "curl's request was not authorized: \(run)")
        let requests = try sso.log().compactMap { $0["endpoint"] as? String }
        #expect(requests == ["login", "refresh", "revoke"] || requests == ["login", "refresh"], "\(requests)")
        #expect(try api.count("register") == 1)
        let corp = try await session.scenario.authctl(["--service", "corp", "status", "--json"])
        #expect(corp.status == 0, "\(corp)")
        #expect(corp.stdout.contains(#""user":"alice""#), "\(corp)")
    }

    @Test("Headless: authctl sandbox runs a test suite, and --keep keeps the folder")
    func sandbox() async throws {
        let session = try await SnippetSession.start()
        defer { session.stop() }
        // The README's `./my-test-suite`: it records where it ran.
        let result = session.folder.appendingPathComponent("suite-result").path
        try session.executable("my-test-suite", """
            #!/bin/sh
            status=0; authctl status >/dev/null 2>&1 || status=$?
            printf '%s %s\\n' "$status" "$DBUS_SESSION_BUS_ADDRESS" >'\(result)'

            """)
        let run = try await session.shell(try ReadmeBlock.named("sandbox").text)
        #expect(run.status == 0, "\(run)")
        let recorded = try String(contentsOfFile: result, encoding: .utf8)
        // Signed out in an empty keyring, on a bus of its own.
        #expect(recorded.hasPrefix("1 unix:"), "\(recorded)")
        #expect(!recorded.contains(session.sandbox.busAddress), "\(recorded)")
        let kept = try #require(run.stderr.split(separator: "\n").compactMap { line in
            line.split(separator: " ").last.map(String.init).flatMap { $0.hasPrefix("/") ? $0 : nil }
        }.last, "\(run)")
        var folder: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: kept, isDirectory: &folder), "\(run)")
        #expect(folder.boolValue, "\(run)")
        try? FileManager.default.removeItem(atPath: kept)
    }

    @Test("Layout: every path of the tree exists, and every folder of Sources/ and of the core is listed")
    func layout() throws {
        let block = try #require(try ReadmeBlock.all().first { $0.kind == "layout" })
        var paths: [String] = []
        var parent = ""
        for line in block.text.split(separator: "\n") {
            // A path starts a line, or is indented by two spaces under the one above; a line
            // indented further continues a description. "A, B" names two siblings.
            let indented = line.hasPrefix("  ")
            guard !line.hasPrefix("   ") else { continue }
            var words = line.split(separator: " ").map(String.init)[...]
            var names: [String] = []
            while let word = words.popFirst() {
                names.append(word.hasSuffix(",") ? String(word.dropLast()) : word)
                if !word.hasSuffix(",") { break }
            }
            guard let first = names.first else { continue }
            if indented {
                paths.append(parent + "/" + first)
                continue
            }
            parent = first.hasSuffix("/") ? String(first.dropLast()) : first
            paths.append(parent)
            let folder = (parent as NSString).deletingLastPathComponent
            for sibling in names.dropFirst() { paths.append(folder + "/" + sibling) }
        }
        #expect(paths.count >= 15, "\(paths)")
        for path in paths {
            #expect(FileManager.default.fileExists(atPath: ReadmeBlock.root.appendingPathComponent(path).path), "README.md Layout: \(path) does not exist")
        }
        // A newcomer reads the tree to find their way: a folder added without a line there is
        // a folder nobody is told about.
        for folder in ["Sources", "Sources/AuthControllerCore"] {
            let listed = Set(paths.compactMap { path -> String? in
                guard path.hasPrefix(folder + "/") else { return nil }
                return path.dropFirst(folder.count + 1).split(separator: "/").first.map { folder + "/" + $0 }
            })
            let url = ReadmeBlock.root.appendingPathComponent(folder)
            for entry in try FileManager.default.contentsOfDirectory(atPath: url.path).sorted() {
                var isFolder: ObjCBool = false
                guard FileManager.default.fileExists(atPath: url.appendingPathComponent(entry).path, isDirectory: &isFolder),
                      isFolder.boolValue else { continue }
                #expect(listed.contains(folder + "/" + entry), "README.md Layout: \(folder)/\(entry)/ is not listed")
            }
        }
    }
}
