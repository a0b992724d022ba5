// SPDX-License-Identifier: Apache-2.0
import DesktopSandbox
import Foundation
import Testing

/// `make install` and `make uninstall` (the README, "Install"), each test into a temporary `DESTDIR`
/// of its own.
///
/// `swift test` holds the lock on `.build/` for its whole run, so these tests never build: `make test`
/// builds the release binary and the manual generator first, and the tests run the recipes with the two
/// targets that run `swift build` taken as done (`-o build -o manual-tool`).
@Suite("make install and make uninstall")
struct InstallTests {
    @Test("installs exactly the files the README lists under Install, one man page per command, with their modes")
    func fileList() async throws {
        let installation = try await Installation.installed()
        defer { installation.remove() }
        let pages = try await CommandTree.load(from: installation.root + "/bin/authctl").all.map { "share/man/man1/\($0.pageName).1" }
        #expect(pages.contains("share/man/man1/authctl.1"), "\(pages)")
        #expect(pages.contains("share/man/man1/authctl.sign-in.1"), "\(pages)")
        let interfaces = try FileManager.default.contentsOfDirectory(atPath: Installation.packageDirectory + "/data")
            .filter { $0.hasPrefix("io.github.authctl.") && $0.hasSuffix(".xml") }
            .map { "share/dbus-1/interfaces/" + $0 }
        #expect(interfaces.count == 2, "\(interfaces)")
        let expected = ["bin/authctl", "share/dbus-1/services/io.github.authctl.service", "lib/systemd/user/authctl.service",
                        "share/bash-completion/completions/authctl", "share/zsh/site-functions/_authctl",
                        "share/fish/vendor_completions.d/authctl.fish"] + interfaces + pages
        #expect(try installation.files() == Set(expected + [Installation.dockerCredentialHelper]))
        for file in expected {
            let mode = (try? FileManager.default.attributesOfItem(atPath: installation.root + "/" + file))?[.posixPermissions] as? Int
            #expect(mode == (file == "bin/authctl" ? 0o755 : 0o644), "\(file)")
        }
        // Relative, so that the staged tree of a package build works wherever it is unpacked.
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: installation.root + "/" + Installation.dockerCredentialHelper) == "authctl")
    }

    @Test("the activation file and the unit start $(PREFIX)/bin/authctl serve, never a DESTDIR path",
          arguments: [Installation.Layout.staged(prefix: nil), .staged(prefix: "/usr"), .direct])
    func installedPath(layout: Installation.Layout) async throws {
        let installation = try await Installation.installed(layout)
        defer { installation.remove() }
        let activation = try String(contentsOfFile: installation.root + "/share/dbus-1/services/io.github.authctl.service", encoding: .utf8)
        #expect(activation.split(separator: "\n") == ["[D-BUS Service]", "Name=io.github.authctl",
                                                      "Exec=\(installation.prefix)/bin/authctl serve", "SystemdService=authctl.service"])
        let unit = try String(contentsOfFile: installation.root + "/lib/systemd/user/authctl.service", encoding: .utf8)
        let settings = unit.split(separator: "\n").filter { !$0.hasPrefix("#") }
        #expect(settings.contains("ExecStart=\(installation.prefix)/bin/authctl serve"))
        #expect(settings.contains("Type=dbus"), "\(unit)")
        #expect(settings.contains("BusName=io.github.authctl"), "\(unit)")
        for file in try installation.files() where !file.hasPrefix("bin/") {
            let text = try String(contentsOfFile: installation.root + "/" + file, encoding: .utf8)
            if !installation.destdir.isEmpty { #expect(!text.contains(installation.destdir), "\(file) names the staging directory") }
            if installation.prefix != "/usr/local" { #expect(!text.contains("/usr/local/bin"), "\(file) names the default prefix") }
        }
    }

    @Test("the installed binary runs, and its completions are the ones it generates")
    func binaryAndCompletions() async throws {
        let installation = try await Installation.installed()
        defer { installation.remove() }
        let binary = installation.root + "/bin/authctl"
        let version = try await runProcess(binary, ["--version"], input: nil, environment: Installation.environment(), timeout: 30)
        let built = try await runProcess(Scenario.binary, ["--version"], input: nil, environment: Installation.environment(), timeout: 30)
        #expect(version.status == 0, "\(version)")
        #expect(!version.output.isEmpty, "\(version)")
        #expect(version.stdout == built.stdout, "\(version)")
        for (shell, file) in [("zsh", "share/zsh/site-functions/_authctl"), ("fish", "share/fish/vendor_completions.d/authctl.fish")] {
            let script = try await runProcess(binary, ["--generate-completion-script", shell], input: nil,
                                              environment: Installation.environment(), timeout: 30)
            #expect(script.status == 0, "\(script)")
            #expect(script.stdout.contains("sign-in"), "\(script)")
            #expect(try String(contentsOfFile: installation.root + "/" + file, encoding: .utf8) == script.stdout, "\(file)")
        }
    }

    @Test("man renders the main page and a subcommand's, found under $(PREFIX)/share/man")
    func manualPages() async throws {
        let installation = try await Installation.installed()
        defer { installation.remove() }
        let tree = try await CommandTree.load(from: installation.root + "/bin/authctl")
        let signIn = try #require(tree.all.first { $0.pageName == "authctl.sign-in" })
        let man = try which("man", package: "man-db")
        let environment = Installation.environment(["MANWIDTH": "80", "MANPAGER": "cat", "LC_ALL": "C"])
        for (page, abstract) in [("authctl", tree.abstract ?? ""), ("authctl.sign-in", signIn.abstract ?? "")] {
            #expect(abstract.count > 10)
            let rendered = try await runProcess(man, ["-l", installation.root + "/share/man/man1/\(page).1"], input: nil,
                                                environment: environment, timeout: 30)
            #expect(rendered.status == 0, "\(rendered)")
            #expect(rendered.stderr.isEmpty, "\(rendered)")
            #expect(rendered.stdout.collapsingWhitespace.contains(abstract.collapsingWhitespace), "\(rendered)")
        }
        // The same page through the manual path, as `man authctl.sign-in` finds it once the prefix is on it.
        let found = try await runProcess(man, ["-M", installation.root + "/share/man", "authctl.sign-in"], input: nil,
                                         environment: environment, timeout: 30)
        #expect(found.status == 0, "\(found)")
        #expect(found.stdout.collapsingWhitespace.contains((signIn.abstract ?? "-").collapsingWhitespace), "\(found)")
    }

    /// bash-completion loads `authctl`'s completion from `$XDG_DATA_DIRS/bash-completion/completions` on
    /// first use; the test lets it, then calls the function it registered as bash does on TAB (as
    /// bash-completion's own tests do): COMP_WORDS and COMP_CWORD set, replies read from COMPREPLY.
    @Test("bash completes authctl si<TAB> to the sign-in and sign-out commands, and sign-i<TAB> to sign-in",
          arguments: [("si", ["sign-in", "sign-out"]), ("sign-i", ["sign-in"]), ("serv", ["serve", "server"])])
    func bashCompletion(word: String, replies: [String]) async throws {
        let installation = try await Installation.installed()
        defer { installation.remove() }
        let loader = "/usr/share/bash-completion/bash_completion"
        #expect(FileManager.default.fileExists(atPath: loader), "install the Debian package bash-completion")
        let script = #"""
            source "$1" || exit 3
            __load_completion authctl || { echo "no completion for authctl in $XDG_DATA_DIRS" >&2; exit 4; }
            read -ra spec <<<"$(complete -p authctl)"
            for ((i = 0; i < ${#spec[@]} - 1; i++)); do [[ ${spec[i]} == -F ]] && function=${spec[i + 1]}; done
            COMP_WORDS=(authctl "$2") COMP_CWORD=1 COMP_LINE="authctl $2" COMP_TYPE=9 COMP_KEY=9
            COMP_POINT=${#COMP_LINE}
            "$function" authctl "$2" authctl
            printf '%s\n' "${COMPREPLY[@]}"
            """#
        let bash = try which("bash", package: "bash")
        let run = try await runProcess(bash, ["--norc", "--noprofile", "-c", script, "bash", loader, word], input: nil,
                                       environment: Installation.environment(["XDG_DATA_DIRS": installation.root + "/share",
                                                                              "HOME": installation.directory]),
                                       timeout: 30)
        #expect(run.status == 0, "\(run)")
        #expect(run.stderr.isEmpty, "\(run)")
        #expect(run.stdout.split(separator: "\n").map(String.init).sorted() == replies, "\(run)")
    }

    @Test("a session bus whose data directory is the prefix lists io.github.authctl as activatable")
    func activatable() async throws {
        let installation = try await Installation.installed()
        defer { installation.remove() }
        let busSession = try which("dbus-run-session", package: "dbus-daemon")
        let gdbus = try which("gdbus", package: "libglib2.0-bin")
        let list = [busSession, "--", gdbus, "call", "--session", "--dest", "org.freedesktop.DBus", "--object-path", "/org/freedesktop/DBus",
                    "--method", "org.freedesktop.DBus.ListActivatableNames"]
        let installed = try await runProcess(list[0], Array(list.dropFirst()), input: nil,
                                             environment: Installation.environment(["XDG_DATA_DIRS": installation.root + "/share"]), timeout: 30)
        #expect(installed.status == 0, "\(installed)")
        #expect(installed.stdout.contains("'io.github.authctl'"), "\(installed)")
        // The same bus without the prefix does not know the name: it came from the installed file.
        let elsewhere = try await runProcess(list[0], Array(list.dropFirst()), input: nil,
                                             environment: Installation.environment(["XDG_DATA_DIRS": installation.directory]), timeout: 30)
        #expect(elsewhere.status == 0, "\(elsewhere)")
        #expect(!elsewhere.stdout.contains("'io.github.authctl'"), "\(elsewhere)")
    }

    /// Installed without DESTDIR, so the activation file names a binary that exists.
    @Test("a call to io.github.authctl starts the installed serve on a bus whose service directory is the prefix's")
    func activation() async throws {
        let installation = try await Installation.installed(.direct)
        defer { installation.remove() }
        let sandbox = try await DesktopSandbox.started(serviceDirectories: [installation.root + "/share/dbus-1/services"])
        defer { sandbox.stop() }
        var scenario = try await Scenario(sandbox: sandbox)
        // The activated serve has the bus daemon's environment: the sandbox's settings folder.
        scenario.extraEnvironment["XDG_CONFIG_HOME"] = sandbox.environment["XDG_CONFIG_HOME"]
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        let status = try await scenario.gdbus("call", "--session", "--dest", "io.github.authctl", "--object-path", "/io/github/authctl/AuthController1",
                                              "--method", "io.github.authctl.AuthController1.GetStatus", scenario.service)
        #expect(status.status == 0, "\(status)")
        #expect(status.stdout.contains("'user': <'alice'>"), "\(status)")
        // The name's owner runs the installed binary.
        let pid = try await scenario.gdbus("call", "--session", "--dest", "org.freedesktop.DBus", "--object-path", "/org/freedesktop/DBus",
                                           "--method", "org.freedesktop.DBus.GetConnectionUnixProcessID", "io.github.authctl")
        let number = try #require(pid.stdout.split(whereSeparator: { !$0.isNumber }).last.flatMap { Int32($0) }, "\(pid)")
        let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(number)/exe")
        #expect(executable == installation.prefix + "/bin/authctl")
    }

    /// Installed without DESTDIR, so the unit's ExecStart and Documentation name files that exist.
    @Test("systemd accepts the installed user unit (systemd-analyze verify)")
    func unitVerifies() async throws {
        let installation = try await Installation.installed(.direct)
        defer { installation.remove() }
        let runtime = installation.directory + "/runtime"
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let analyze = try which("systemd-analyze", package: "systemd")
        let run = try await runProcess(analyze, ["--user", "verify", installation.root + "/lib/systemd/user/authctl.service"], input: nil,
                                       environment: Installation.environment(["XDG_RUNTIME_DIR": runtime, "HOME": installation.directory,
                                                                              "MANPATH": installation.root + "/share/man"]),
                                       timeout: 60)
        #expect(run.status == 0, "\(run)")
        #expect(run.stderr.isEmpty, "\(run)")
    }

    /// What `systemctl --user enable authctl` does for a person who wants serve from login, done
    /// offline in the staged tree (no user manager runs here).
    @Test("the installed user unit can be enabled: it is wanted by default.target")
    func unitEnables() async throws {
        let installation = try await Installation.installed(.staged(prefix: "/usr"))
        defer { installation.remove() }
        let systemctl = try which("systemctl", package: "systemd")
        let run = try await runProcess(systemctl, ["--root=\(installation.destdir)", "--global", "enable", "authctl.service"], input: nil,
                                       environment: Installation.environment(), timeout: 60)
        #expect(run.status == 0, "\(run)")
        let link = installation.destdir + "/etc/systemd/user/default.target.wants/authctl.service"
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link) == "/usr/lib/systemd/user/authctl.service")
    }

    @Test("make uninstall removes every installed file and nothing else",
          arguments: [Installation.Layout.staged(prefix: nil), .staged(prefix: "/usr"), .direct])
    func uninstall(layout: Installation.Layout) async throws {
        let installation = try await Installation.installed(layout)
        defer { installation.remove() }
        // Files of other programs in the same folders stay.
        let others = ["share/man/man1/other.1", "share/dbus-1/services/org.example.Other.service", "bin/other"]
        for file in others {
            #expect(FileManager.default.createFile(atPath: installation.root + "/" + file, contents: Data("other\n".utf8)))
        }
        let run = try await installation.make("uninstall")
        #expect(run.status == 0, "\(run)")
        #expect(try installation.files() == Set(others))
    }
}

/// A `make install` into a temporary directory.
struct Installation {
    static let packageDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    /// The temporary directory that holds everything the test makes.
    let directory: String
    /// `DESTDIR`: empty, or a staging folder inside ``directory``.
    let destdir: String
    /// `PREFIX`: a path the installed files name; inside ``directory`` when nothing is staged.
    let prefix: String
    /// Where the files are: `$(DESTDIR)$(PREFIX)`.
    var root: String { destdir + prefix }

    /// Where a test installs: staged in a `DESTDIR` (with a `PREFIX`, or make's default when `nil`), or
    /// straight into a `PREFIX` inside the temporary directory.
    enum Layout: CustomTestStringConvertible {
        case staged(prefix: String?)
        case direct

        var testDescription: String {
            switch self {
            case .staged(let prefix?): "PREFIX=\(prefix) DESTDIR=…"
            case .staged(nil): "DESTDIR=…"
            case .direct: "PREFIX=…"
            }
        }
    }

    /// Whether `make` is given `PREFIX` (or uses its default, /usr/local).
    let explicitPrefix: Bool

    static func installed(_ layout: Layout = .staged(prefix: "/opt/authctl-test")) async throws -> Installation {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("authctl-install-" + UUID().uuidString).path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let installation = switch layout {
        case .staged(let prefix):
            Installation(directory: directory, destdir: directory + "/stage", prefix: prefix ?? "/usr/local", explicitPrefix: prefix != nil)
        case .direct:
            Installation(directory: directory, destdir: "", prefix: directory + "/prefix", explicitPrefix: true)
        }
        let run = try await installation.make("install")
        try #require(run.status == 0, "make install: \(run)")
        return installation
    }

    /// Runs `make TARGET [PREFIX=…] DESTDIR=…` in the package, without building (see the suite's comment).
    func make(_ target: String) async throws -> Run {
        try await runProcess(try which("make", package: "make"),
                             ["-C", Self.packageDirectory, "-o", "build", "-o", "manual-tool", target, "DESTDIR=" + destdir]
                                + (explicitPrefix ? ["PREFIX=" + prefix] : []),
                             input: nil, environment: Self.environment(), timeout: 120)
    }

    /// Every file and symbolic link under ``root``, relative to it.
    /// The link under the name registry clients run their credential helper by.
    static let dockerCredentialHelper = "bin/docker-credential-authctl"

    func files() throws -> Set<String> {
        var found: Set<String> = []
        guard let walker = FileManager.default.enumerator(atPath: root) else { return found }
        while let path = walker.nextObject() as? String {
            if walker.fileAttributes?[.type] as? FileAttributeType != .typeDirectory { found.insert(path) }
        }
        return found
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// This process's environment without what an enclosing `make test` passes down (its flags and
    /// job server), or a `PREFIX`/`DESTDIR` of the caller's, plus `extra`.
    static func environment(_ extra: [String: String] = [:]) -> [String: String] {
        var variables = ProcessInfo.processInfo.environment
        for key in ["MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PREFIX", "DESTDIR", "SOURCE_DATE_EPOCH", "MANPATH", "MANOPT", "XDG_DATA_DIRS",
                    "DBUS_SESSION_BUS_ADDRESS"] {
            variables.removeValue(forKey: key)
        }
        variables.merge(extra) { $1 }
        return variables
    }
}

/// The commands an `authctl` binary defines, as its `--experimental-dump-help` describes them (what
/// swift-argument-parser's manual generator reads).
struct CommandTree: Decodable {
    let commandName: String
    let superCommands: [String]?
    let abstract: String?
    let subcommands: [CommandTree]?

    /// `authctl`, `authctl.server`, `authctl.server.set`…: the generator's page names.
    var pageName: String { ((superCommands ?? []) + [commandName]).joined(separator: ".") }

    /// This command and every subcommand under it.
    var all: [CommandTree] { [self] + (subcommands ?? []).flatMap(\.all) }

    private struct Dump: Decodable {
        let command: CommandTree
    }

    static func load(from binary: String) async throws -> CommandTree {
        let run = try await runProcess(binary, ["--experimental-dump-help"], input: nil, environment: Installation.environment(), timeout: 30)
        try #require(run.status == 0, "\(run)")
        return try JSONDecoder().decode(Dump.self, from: Data(run.stdout.utf8)).command
    }
}

extension String {
    /// Runs of white space as one space: text a man page has wrapped compares with its one-line source.
    var collapsingWhitespace: String {
        split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }
}
