// SPDX-License-Identifier: Apache-2.0
import Foundation
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `.ci/demo`, the job `make demo` runs after building: it must end by itself, show every part of
/// the round trip, and leave nothing running. Run here with the debug `authctl` the other tests
/// use (`AUTHCTL_BIN_DIR`), never through `make demo`: `swift test` holds the lock on `.build/`,
/// and the `swift build` of `make demo` would wait for it for ever.
@Suite("The demo (.ci/demo)")
struct DemoTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    /// The variable that marks every process the demo starts, daemons in groups of their own included.
    static let marker = "AUTHCTL_DEMO_TEST_RUN"

    /// The environment of a machine without a desktop session: no session bus, at its address or
    /// at GLib's `$XDG_RUNTIME_DIR/bus` fallback, so the demo runs inside `authctl sandbox` and
    /// never reaches a real keyring; settings and data in a folder of the test's own.
    static func environment(in folder: String, runID: String) throws -> [String: String] {
        var variables = ProcessInfo.processInfo.environment
        for key in ["DBUS_SESSION_BUS_ADDRESS", "DISPLAY", "WAYLAND_DISPLAY", "AUTHCTL_SERVICE", "AUTHCTL_DEBUG", "AUTHCTL_DEMO_INSIDE"] {
            variables.removeValue(forKey: key)
        }
        for name in ["runtime", "config", "data"] {
            try FileManager.default.createDirectory(atPath: folder + "/" + name, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        }
        variables["XDG_RUNTIME_DIR"] = folder + "/runtime"
        variables["XDG_CONFIG_HOME"] = folder + "/config"
        variables["XDG_DATA_HOME"] = folder + "/data"
        variables["AUTHCTL_BIN_DIR"] = URL(fileURLWithPath: Scenario.binary).deletingLastPathComponent().path
        variables[marker] = runID
        return variables
    }

    /// The live processes whose environment carries `marker=runID`, or that are in process group
    /// `group`.
    static func processes(marked runID: String, orIn group: pid_t) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        let needle = Array("\(marker)=\(runID)".utf8)
        return entries.compactMap { pid_t($0) }.filter { pid in
            guard pid != getpid(), processExists(pid) else { return false }
            if let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
               let fields = stat.split(separator: ")").last?.split(separator: " "), fields.count > 2, pid_t(fields[2]) == group {
                return true
            }
            guard let environ = FileManager.default.contents(atPath: "/proc/\(pid)/environ") else { return false }
            return environ.split(separator: 0).contains { Array($0) == needle }
        }
    }

    /// A process's command line, for a failure message.
    static func commandLine(_ pid: pid_t) -> String {
        let bytes = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") ?? Data()
        return "\(pid): " + String(decoding: bytes.map { $0 == 0 ? UInt8(ascii: " ") : $0 }, as: UTF8.self)
    }

    @Test("ends by itself within 240 s with 0, shows the local round trip, the remote session's end, the OpenID Connect sign-ins, serve's GetStatus and a PropertiesChanged, and leaves no process behind")
    func demoRunsToTheEnd() async throws {
        let folder = try freshDirectory("authctl-demo")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let runID = UUID().uuidString
        let demo = try await Spawned(Self.root.appendingPathComponent(".ci/demo").path, [], input: nil,
                                     environment: try Self.environment(in: folder, runID: runID), leadsProcessGroup: true)
        let run = await demo.wait(timeout: 240)
        // What the demo started must be gone once it has ended; the sandbox's daemons get the
        // second or two `authctl sandbox` takes to stop them.
        let gone = await eventually(within: .seconds(5)) { Self.processes(marked: runID, orIn: demo.pid).isEmpty }
        let left = Self.processes(marked: runID, orIn: demo.pid)
        #expect(gone, "still running after the demo: \(left.map(Self.commandLine))")
        for pid in left { kill(pid, SIGKILL) }

        #expect(run.seconds < 240, "the demo did not end within 240 s and was killed: \(run)")
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.hasPrefix("No desktop keyring is reachable: running the demo in a throwaway one (authctl sandbox)."), "\(run)")

        let remoteStart = try #require(run.stdout.range(of: "--- A remote account"), "\(run)")
        let openIDStart = try #require(run.stdout.range(of: "--- OpenID Connect", range: remoteStart.upperBound..<run.stdout.endIndex), "\(run)")
        let serveStart = try #require(run.stdout.range(of: "--- authctl serve", range: openIDStart.upperBound..<run.stdout.endIndex), "\(run)")
        let local = run.stdout[..<remoteStart.lowerBound]
        let remote = run.stdout[remoteStart.upperBound..<openIDStart.lowerBound]
        let openID = run.stdout[openIDStart.upperBound..<serveStart.lowerBound]
        let serve = run.stdout[serveStart.upperBound...]
        // The local round trip as `watch --json` received it.
        for reason in ["initial", "sign-in", "switch", "sign-out"] {
            #expect(local.contains(#""reason":"\#(reason)""#), "no \(reason) event in the local part: \(local)")
        }
        // The remote account's session ends when the server refuses the refresh token.
        #expect(remote.contains(#""reason":"sign-in""#), "\(remote)")
        #expect(remote.contains(#""reason":"expired""#), "\(remote)")
        // The OpenID Connect part: one sign-in in the browser (Ada), one with a device code (Grace).
        #expect(openID.contains("Signed in to io.github.authctl.demo-oidc as ada@example.org."), "\(openID)")
        #expect(openID.contains("\"nonce\":"), "the ID token's claims: \(openID)")
        #expect(openID.contains("Signed in to io.github.authctl.demo-oidc as grace@example.org."), "\(openID)")
        // serve answers GetStatus for the demo's service, and its object announces the change.
        #expect(serve.contains("io.github.authctl.AuthController1.GetStatus"), "\(serve)")
        #expect(serve.contains("'user': <'alice@example.org'>"), "\(serve)")
        #expect(serve.contains("org.freedesktop.DBus.Properties.PropertiesChanged"), "\(serve)")
        #expect(run.stdout.hasSuffix("The demo is over: serve has exited, and nothing it started is still running.\n"), "\(run)")
    }
}
