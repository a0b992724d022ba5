// SPDX-License-Identifier: Apache-2.0
import AuthController
import DesktopSandbox
import Foundation
import TestSupport
import Testing

/// `authctl serve` (`authctl.serve(1)`) under faults and misuse: what a signal, a hostile peer or a
/// failing server must not break. Each test has a sandbox of its own, as `serve` owns one name
/// per bus.
@Suite("serve under faults and misuse")
struct ServeProbeTests {
    /// A private bus and keyring, a scenario in it, and a running `serve` that owns its name.
    func serving(_ arguments: [String] = []) async throws -> (DesktopSandbox, Scenario, Spawned) {
        let sandbox = try await DesktopSandbox.started()
        let scenario = try await Scenario(sandbox: sandbox)
        let serve = try await scenario.start(["serve"] + arguments)
        let owned = try await scenario.gdbus("wait", "--session", "--timeout", "20", LoginService.busName)
        #expect(owned.status == 0, "\(owned)\n\(serve.stderr)")
        return (sandbox, scenario, serve)
    }

    @Test("SIGTERM while a background refresh is under way: serve stores the rotated tokens before it exits")
    func terminatedDuringBackgroundRefresh() async throws {
        let server = try await TokenServer()
        try server.configure(["accounts": ["alice": "pw"], "access_lifetime": 2])
        let (sandbox, scenario, serve) = try await serving()
        defer { sandbox.stop() }
        try await scenario.authctl("sign-in", "alice", "--server", server.oauth2, "--password-stdin", stdin: "pw").expect(0)
        // The server rotates the refresh token as it answers, a second after the request came.
        try server.configure(["refresh_delay": 1.5, "access_lifetime": 300])
        _ = try await eventually(within: .seconds(20)) { try server.count("refresh") > 0 }
        #expect(try server.count("refresh") == 1, "serve refreshed the 2 s token at 80% of its lifetime")
        serve.signal(SIGTERM)
        let ended = await serve.wait(timeout: 30)
        #expect(ended.status == 0, "\(ended)")
        // The token serve received is the one stored: no further refresh, and the server takes it.
        let token = try await scenario.authctl("token")
        #expect(token.status == 0, "\(token)")
        #expect(try server.accepts(token.output))
        #expect(try server.count("refresh") == 1)
    }

    @Test("a serve taken over by `serve --replace` exits 0 and prints nothing")
    func replacedQuietly() async throws {
        let (sandbox, scenario, first) = try await serving()
        defer { sandbox.stop() }
        let second = try await scenario.start(["serve", "--replace"])
        defer { second.signal(SIGTERM) }
        let replaced = await first.wait(timeout: 20)
        #expect(replaced.status == 0, "\(replaced)")
        #expect(replaced.stderr.isEmpty, "\(replaced)")
        second.signal(SIGTERM)
        let replacer = await second.wait(timeout: 20)
        #expect(replacer.status == 0, "\(replacer)")
        #expect(replacer.stderr.isEmpty, "\(replacer)")
    }

    @Test("the call that activates serve is answered from the service's object: Properties.GetAll shows who is signed in")
    func activatingCallFindsTheObjects() async throws {
        let services = FileManager.default.temporaryDirectory.appendingPathComponent("authctl-services-" + UUID().uuidString.lowercased())
        try FileManager.default.createDirectory(at: services, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: services) }
        try "[D-BUS Service]\nName=\(LoginService.busName)\nExec=\(Scenario.binary) serve --idle-exit 30\n"
            .write(to: services.appendingPathComponent("\(LoginService.busName).service"), atomically: true, encoding: .utf8)
        let sandbox = try await DesktopSandbox.started(serviceDirectories: [services.path])
        defer { sandbox.stop() }
        var scenario = try await Scenario(sandbox: sandbox)
        // The activated serve has the bus daemon's environment, so the sandbox's settings folder.
        scenario.extraEnvironment["XDG_CONFIG_HOME"] = sandbox.environment["XDG_CONFIG_HOME"]
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        let properties = try await scenario.gdbus("call", "--session", "--dest", LoginService.busName,
                                                  "--object-path", LoginService.objectPath(of: scenario.serviceName),
                                                  "--method", "org.freedesktop.DBus.Properties.GetAll", LoginService.sessionInterface)
        #expect(properties.status == 0, "\(properties)")
        #expect(properties.stdout.contains("'User': <'alice'>"), "\(properties)")
    }
}

extension ServeProbeTests {
    /// `GetManagedObjects` as gdbus prints it.
    func managedObjects(_ scenario: Scenario) async throws -> Run {
        try await scenario.gdbus("call", "--session", "--dest", LoginService.busName, "--object-path", LoginService.objectPath,
                                 "--method", "org.freedesktop.DBus.ObjectManager.GetManagedObjects")
    }

    @Test("no keyring, then one, then none again: the service keeps its object, which shows what the keyring tells once it is there")
    func keyringComesAndGoes() async throws {
        let sandbox = try await DesktopSandbox.started(keyring: false)
        defer { sandbox.stop() }
        var scenario = try await Scenario(sandbox: sandbox)
        let server = try await TokenServer()
        try await scenario.authctl("server", "set", server.oauth2).expect(0)
        // The settings name a user, whose item only a keyring can confirm (nobody signed in
        // needs no keyring to be shown as such).
        let settings = try String(contentsOfFile: scenario.settingsFile, encoding: .utf8)
            .replacingOccurrences(of: "[\(scenario.service)]\n", with: "[\(scenario.service)]\nuser=alice\n")
        try settings.write(toFile: scenario.settingsFile + ".new", atomically: false, encoding: .utf8)
        chmod(scenario.settingsFile + ".new", 0o600)
        #expect(rename(scenario.settingsFile + ".new", scenario.settingsFile) == 0)
        let serve = try await scenario.start(["serve"])
        defer { serve.signal(SIGTERM) }
        #expect(try await scenario.gdbus("wait", "--session", "--timeout", "20", LoginService.busName).status == 0)
        let path = LoginService.objectPath(of: scenario.serviceName)
        // Every service with a settings group is an object, whatever the keyring.
        var objects = try await managedObjects(scenario)
        #expect(objects.stdout.contains("'\(path)'"), "\(objects)\n\(serve.stderr)")
        #expect(objects.stdout.contains("'Server': <''>"), "\(objects)\n\(serve.stderr)")

        // A keyring daemon appears: serve reads the state again without any other trigger (and
        // ends alice's session, whose item the new keyring does not hold).
        let keyringData = sandbox.directory + "/keyring-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: keyringData, withIntermediateDirectories: true)
        scenario.extraEnvironment["XDG_DATA_HOME"] = keyringData
        let keyring = try await Spawned(try which("gnome-keyring-daemon", package: "gnome-keyring"),
                                        ["--foreground", "--unlock", "--components=secrets"], input: Array("pw".utf8),
                                        environment: scenario.environment)
        defer { keyring.signal(SIGKILL) }
        _ = try await eventually(within: .seconds(20), pollingEvery: .milliseconds(50)) {
            objects = try await managedObjects(scenario)
            return objects.stdout.contains("'Server': <'\(server.oauth2)'>")
        }
        #expect(objects.stdout.contains("'Server': <'\(server.oauth2)'>"), "\(objects)")

        // Gone again: the object stays as it was; a method says the keyring is unavailable.
        keyring.signal(SIGKILL)
        _ = await keyring.wait()
        let status = try await scenario.gdbus("call", "--session", "--dest", LoginService.busName, "--object-path", LoginService.objectPath,
                                              "--method", "io.github.authctl.AuthController1.GetStatus", scenario.service)
        #expect(status.status != 0, "\(status)")
        #expect(status.stderr.contains("io.github.authctl.Error.Unavailable"), "\(status)")
        objects = try await managedObjects(scenario)
        #expect(objects.stdout.contains("'\(path)'"), "\(objects)")
        #expect(objects.stdout.contains("'Server': <'\(server.oauth2)'>"), "\(objects)")
    }
}

/// `make install` and `make uninstall` (the README, "Install") given paths with characters that mean something
/// to the shell, sed, D-Bus or systemd. Like ``InstallTests``, these run the recipes without building.
@Suite("make install with awkward paths")
struct InstallPathProbeTests {
    func installation(destdir: String?, prefix: String) throws -> Installation {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("authctl-install-" + UUID().uuidString).path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return Installation(directory: directory, destdir: destdir.map { directory + $0 } ?? "", prefix: prefix, explicitPrefix: true)
    }

    @Test("a PREFIX the activation file and the unit cannot name as it is: one error, nothing installed",
          arguments: ["/opt/with space", "/opt/a|b", "/opt/a&b", "/opt/it's", "/opt/q\"q", "/opt/50%", "/opt/back\\nslash", "relative/dir"])
    func unusablePrefix(prefix: String) async throws {
        let installation = try installation(destdir: "/stage", prefix: prefix)
        defer { installation.remove() }
        let run = try await installation.make("install")
        #expect(run.status == 2, "\(run)")
        #expect(run.stderr.contains("PREFIX must be an absolute path"), "\(run)")
        #expect(!FileManager.default.fileExists(atPath: installation.destdir), "nothing staged")
    }

    @Test("a DESTDIR with spaces, quotes and shell operators stages the tree there, and uninstall empties it")
    func awkwardDestdir() async throws {
        let installation = try installation(destdir: "/it's a \"stage\" |&;`y`", prefix: "/opt/ok-1.2+x@y~z:w")
        defer { installation.remove() }
        var run = try await installation.make("install")
        #expect(run.status == 0, "\(run)")
        let activation = try String(contentsOfFile: installation.root + "/share/dbus-1/services/io.github.authctl.service", encoding: .utf8)
        #expect(activation.contains("Exec=/opt/ok-1.2+x@y~z:w/bin/authctl serve\n"), "\(activation)")
        #expect(try installation.files().contains("bin/authctl"))
        run = try await installation.make("uninstall")
        #expect(run.status == 0, "\(run)")
        #expect(try installation.files().isEmpty)
    }
}
