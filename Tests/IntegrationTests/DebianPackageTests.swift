// SPDX-License-Identifier: Apache-2.0
import Foundation
import Testing

/// The Debian package that `make deb` builds (and `make test` builds before the tests): what lintian
/// says of it, what its control file promises, and — in a clean Debian 12 system made with
/// mmdebstrap (Support/debian-root), with nothing in it but what installing the package brings —
/// that it installs without Swift, works, and leaves nothing behind when purged.
@Suite("The Debian package")
struct DebianPackageTests {
    /// `.build/deb/authctl_VERSION_ARCH.deb`, which `make test` builds first (`make deb`).
    static func package() throws -> String {
        let folder = Installation.packageDirectory + "/.build/deb"
        let found = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { $0.hasPrefix("authctl_") && $0.hasSuffix(".deb") }
        guard found.count == 1, let name = found.first else {
            Issue.record("expected one package in \(folder), found \(found): run make deb")
            throw CocoaError(.fileNoSuchFile)
        }
        return folder + "/" + name
    }

    private func run(_ program: String, _ arguments: [String], timeout: Double = 120) async throws -> Run {
        try await runProcess(try which(program, package: program == "lintian" ? "lintian" : "dpkg"), arguments, input: nil,
                             environment: ProcessInfo.processInfo.environment, timeout: timeout)
    }

    /// A field of the package's control file.
    private func field(_ name: String) async throws -> String {
        try await run("dpkg-deb", ["-f", try Self.package(), name]).output
    }

    @Test("lintian reports no error and no warning")
    func lintian() async throws {
        let run = try await run("lintian", ["--no-cfg", try Self.package()], timeout: 300)
        #expect(run.status == 0, "\(run)")
        let tags = run.stdout.split(separator: "\n").filter { $0.hasPrefix("E:") || $0.hasPrefix("W:") }
        #expect(tags.isEmpty, "\(tags)")
    }

    @Test("its version is the binary's; Depends come from the binary, with libsecret, which it loads; the rest is recommended or suggested")
    func control() async throws {
        let package = try Self.package()
        let version = try await field("Version")
        let built = try await runProcess(Scenario.binary, ["--version"], input: nil, environment: ProcessInfo.processInfo.environment, timeout: 30)
        #expect(version == built.output)
        #expect(package.hasSuffix("/authctl_\(version)_\(try await run("dpkg", ["--print-architecture"]).output).deb"))
        let depends = try await field("Depends").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        for library in ["libc6", "libglib2.0-0", "libargon2-1", "libsecret-1-0"] {
            #expect(depends.contains { $0.hasPrefix(library) }, "\(depends)")
        }
        #expect(!depends.contains { $0.contains("swift") || $0.hasPrefix("libstdc++") }, "\(depends)")
        let recommends = try await field("Recommends").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        for alternative in ["gnome-keyring | kwalletmanager | keepassxc", "dbus-user-session | dbus-x11", "libsoup-3.0-0", "glib-networking",
                            "libgnutls30"] {
            #expect(recommends.contains(alternative), "\(recommends)")
        }
        let suggests = try await field("Suggests").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        for alternative in ["libqrencode4", "libxml2", "git", "kubernetes-client | kubectl", "skopeo", "awscli"] {
            #expect(suggests.contains(alternative), "\(suggests)")
        }
        let contents = try await run("dpkg-deb", ["-c", package]).stdout
        for path in ["./usr/bin/authctl", "./usr/bin/docker-credential-authctl -> authctl", "./usr/share/zsh/vendor-completions/_authctl",
                     "./usr/share/man/man1/authctl.1.gz", "./usr/share/man/man1/docker-credential-authctl.1.gz",
                     "./usr/share/dbus-1/services/io.github.authctl.service", "./usr/lib/systemd/user/authctl.service",
                     "./usr/share/doc/authctl/copyright", "./usr/share/doc/authctl/changelog.gz"] {
            #expect(contents.contains(path), "\(path) is not in the package")
        }
    }

    /// The package's copyright file, read by python3-debian's DEP-5 parser in its strict mode, which
    /// refuses a paragraph or field the format does not have.
    private static let readCopyright = #"""
        import sys
        from debian import copyright
        parsed = copyright.Copyright(sys.stdin, strict=True)
        print(parsed.header.format)
        for paragraph in parsed.all_files_paragraphs():
            print("files", " ".join(paragraph.files), "|", paragraph.license.synopsis)
        for paragraph in parsed.all_license_paragraphs():
            print("license", paragraph.license.synopsis)
        """#

    @Test("its copyright file is DEP-5: authctl under the Apache License 2.0, and what is linked in under its own licence, each with its text")
    func copyright() async throws {
        let extract = "dpkg-deb --fsys-tarfile \"$1\" | tar -xO ./usr/share/doc/authctl/copyright | \"$2\" -c \"$3\""
        // Debian's own Python, which python3-debian serves (another python3 may come first on PATH).
        let python = "/usr/bin/python3"
        let run = try await runProcess("/bin/sh", ["-c", extract, "sh", try Self.package(), python, Self.readCopyright], input: nil,
                                       environment: ProcessInfo.processInfo.environment, timeout: 60)
        #expect(run.status == 0, "\(run)")
        let lines = run.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/", "\(run)")
        #expect(lines.contains("files * | Apache-2.0"), "\(run)")
        #expect(lines.contains { $0.hasPrefix("files swift/stdlib/* ") && $0.hasSuffix("| Apache-2.0 with Swift-Runtime-Library exception") },
                "\(run)")
        #expect(lines.contains("files gcc/libstdc++-v3/* | GPL-3+ with GCC-Runtime-Library-3.1 exception"), "\(run)")
        // Every licence a Files paragraph names has its text in a paragraph of its own.
        let named = Set(lines.filter { $0.hasPrefix("files ") }.compactMap { $0.split(separator: "|").last?.trimmingCharacters(in: .whitespaces) })
        let texts = Set(lines.filter { $0.hasPrefix("license ") }.map { String($0.dropFirst("license ".count)) })
        #expect(named == texts, "\(run)")
    }

    /// The script run as root in the clean system: each step prints `step NAME` when it passed.
    private static let inClean = #"""
        set -eu
        apt-get install -y -qq /tmp/authctl_*.deb >/tmp/install.log 2>&1 || { tail -20 /tmp/install.log; exit 10; }
        echo "step installed"
        if command -v swift >/dev/null || ls -d /usr/lib/swift* /usr/libexec/swift* 2>/dev/null; then exit 11; fi
        dpkg-query -W -f='${Package} ${Status}\n' gnome-keyring dbus-user-session libsoup-3.0-0 glib-networking libgnutls30 libsecret-1-0
        echo "step no swift"
        authctl sandbox -- sh -c 'printf "pw\npw\n" | authctl sign-in ada@example.org --password-stdin && authctl status && authctl sign-out'
        echo "step sandbox"
        apt-get install -y -qq man-db >/tmp/man.log 2>&1 || { tail -5 /tmp/man.log; exit 12; }
        MANPAGER=cat MANWIDTH=80 man authctl | head -8
        whatis authctl.sign-in docker-credential-authctl
        echo "step man"
        grep '^Exec=' /usr/share/dbus-1/services/io.github.authctl.service
        grep '^ExecStart=' /usr/lib/systemd/user/authctl.service
        dbus-run-session -- sh -c 'dbus-send --session --print-reply --dest=io.github.authctl /io/github/authctl/AuthController1 org.freedesktop.DBus.Peer.Ping >/dev/null && dbus-send --session --print-reply --dest=org.freedesktop.DBus / org.freedesktop.DBus.GetConnectionUnixProcessID string:io.github.authctl | tail -1 | awk "{print \$2}" | xargs -I{} readlink /proc/{}/exe' 2>/dev/null
        echo "step activation"
        ls /usr/share/zsh/vendor-completions/_authctl /usr/share/bash-completion/completions/authctl /usr/share/fish/vendor_completions.d/authctl.fish
        echo "step completions"
        dpkg -L authctl >/tmp/files
        apt-get purge -y -qq authctl >/dev/null 2>&1
        left=0
        while read -r file; do [ -d "$file" ] && continue; if [ -e "$file" ] || [ -L "$file" ]; then echo "left: $file"; left=1; fi; done </tmp/files
        [ "$left" = 0 ]
        echo "step purged"
        """#

    @Test("in a clean Debian 12: installs with its recommends and no Swift; signs in, shows the status and signs out; man, activation, unit, completions; purge leaves nothing")
    func cleanSystem() async throws {
        let script = Installation.packageDirectory + "/Tests/IntegrationTests/Support/debian-root"
        // The first run makes the base system and downloads the packages (minutes); later ones take
        // about a minute.
        let run = try await runProcess(script, ["run", Installation.packageDirectory + "/.build/debian-root", try Self.package(), Self.inClean],
                                       input: nil, environment: ProcessInfo.processInfo.environment, timeout: 1800)
        #expect(run.status == 0, "\(run)")
        let steps = run.stdout.split(separator: "\n").filter { $0.hasPrefix("step ") }.map { String($0.dropFirst(5)) }
        #expect(steps == ["installed", "no swift", "sandbox", "man", "activation", "completions", "purged"], "\(run)")
        #expect(run.stdout.contains("Signed in to io.github.authctl as ada@example.org (root) since"), "\(run)")
        #expect(run.stdout.contains("Signed out of io.github.authctl: ada@example.org."), "\(run)")
        #expect(run.stdout.contains("AUTHCTL(1)"), "\(run)")
        #expect(run.stdout.contains("authctl.sign-in (1)"), "\(run)")
        #expect(run.stdout.contains("docker-credential-authctl (1)"), "\(run)")
        #expect(run.stdout.contains("Exec=/usr/bin/authctl serve\nExecStart=/usr/bin/authctl serve\n/usr/bin/authctl\n"), "\(run)")
        for package in ["gnome-keyring", "dbus-user-session", "libsoup-3.0-0", "glib-networking", "libgnutls30", "libsecret-1-0"] {
            #expect(run.stdout.contains("\(package) install ok installed"), "\(package): \(run)")
        }
    }
}
