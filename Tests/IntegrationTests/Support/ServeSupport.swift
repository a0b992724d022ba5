// SPDX-License-Identifier: Apache-2.0
import AuthController
@testable import AuthControllerCore
import DesktopSandbox
import Foundation
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// What the tests of `authctl serve` share: its names, a `gdbus call` client, a
/// `dbus-monitor` that timestamps what it sees, and a reader for GVariant's text form.
enum ServeBus {
    static let name = "io.github.authctl"
    static let path = "/io/github/authctl/AuthController1"
    static let interface = "io.github.authctl.AuthController1"
}

extension Scenario {
    /// The scenario with another settings folder (`XDG_CONFIG_HOME`), e.g. the one a `serve`
    /// reads.
    func withConfigHome(_ configHome: String) -> Scenario {
        var scenario = self
        scenario.extraEnvironment["XDG_CONFIG_HOME"] = configHome
        return scenario
    }

    /// `gdbus call` of `method` on serve's `AuthController1` object (or `interface`, `path`).
    func call(_ method: String, _ arguments: String..., interface: String = ServeBus.interface,
              path: String = ServeBus.path) async throws -> Run {
        try await runProcess(try which("gdbus", package: "libglib2.0-bin"),
                             ["call", "--session", "--dest", ServeBus.name, "--object-path", path, "--method", interface + "." + method]
                                + arguments,
                             input: nil, environment: environment, timeout: 60)
    }

    /// The unique name owning `io.github.authctl`, or `nil` when it has none.
    func nameOwner() async throws -> String? {
        let run = try await gdbus("call", "--session", "--dest", "org.freedesktop.DBus", "--object-path", "/org/freedesktop/DBus",
                                  "--method", "org.freedesktop.DBus.GetNameOwner", ServeBus.name)
        guard run.status == 0 else { return nil }
        return GVariantText.strings(run.stdout).first
    }

    /// Starts `authctl serve` with `arguments` and returns once it owns the name, as a
    /// `NameOwnerChanged` seen by a monitor says (not a `gdbus wait`, which may start too late
    /// to see a serve that exits after a second of idleness).
    func startServe(_ arguments: [String] = []) async throws -> (Spawned, owner: String) {
        let monitor = try await BusMonitor(self, rules: ["type='signal',sender='org.freedesktop.DBus',member='NameOwnerChanged',arg0='\(ServeBus.name)'"])
        let serve = try await start(["serve"] + arguments)
        let owners = await monitor.wait { $0.strings.count == 3 && $0.strings[0] == ServeBus.name && !$0.strings[2].isEmpty }
        let owner = try #require(owners.first?.strings[2], "serve does not own the name: \(serve.stderr)")
        return (serve, owner)
    }

    /// The `Session1` properties of `service`'s object.
    func sessionProperties(_ service: String) async throws -> [String: String] {
        let run = try await call("GetAll", "io.github.authctl.Session1", interface: "org.freedesktop.DBus.Properties",
                                 path: LoginService.objectPath(of: ServiceName(rawValue: service)!))
        #expect(run.status == 0, "\(run)")
        return GVariantText.dictionary(run.stdout)
    }
}

extension Run {
    /// A failed `gdbus call`'s D-Bus error: its name and message (`Error: GDBus.Error:NAME: MESSAGE`).
    var dbusError: (name: String, message: String)? {
        let prefix = "Error: GDBus.Error:"
        guard status != 0, stderr.hasPrefix(prefix) else { return nil }
        let rest = stderr.dropFirst(prefix.count)
        guard let colon = rest.range(of: ": ") else { return nil }
        var message = String(rest[colon.upperBound...])
        if message.hasSuffix("\n") { message.removeLast() }
        return (String(rest[..<colon.lowerBound]), message)
    }
}

/// Reads the few shapes of GVariant text that `gdbus call` prints for serve's answers.
enum GVariantText {
    /// `'key': <value>` pairs of a flat `a{sv}` (values as printed: `'text'`, `uint64 5`, `true`).
    static func dictionary(_ text: String) -> [String: String] {
        var result: [String: String] = [:]
        let pattern = try! NSRegularExpression(pattern: #"'([A-Za-z]+)': <((?:'[^']*')|[^>]*)>"#)
        for match in pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
            let key = String(text[Range(match.range(at: 1), in: text)!])
            result[key] = unquoted(String(text[Range(match.range(at: 2), in: text)!]))
        }
        return result
    }

    /// A value without its quotes or its `uint64 ` / `objectpath ` type prefix.
    static func unquoted(_ value: String) -> String {
        var value = value
        for prefix in ["uint64 ", "objectpath "] where value.hasPrefix(prefix) { value.removeFirst(prefix.count) }
        if value.hasPrefix("'") && value.hasSuffix("'") && value.count >= 2 { value = String(value.dropFirst().dropLast()) }
        return value
    }

    /// Every quoted string, in order.
    static func strings(_ text: String) -> [String] {
        let pattern = try! NSRegularExpression(pattern: #"'([^']*)'"#)
        return pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)).map { String(text[Range($0.range(at: 1), in: text)!]) }
    }
}

/// `dbus-monitor` on a sandbox's bus: every message it sees, with the time it saw it. Both
/// ends of a latency (a signal and the reaction to it) are stamped by this one observer, so
/// the difference does not include the test process's own scheduling.
final class BusMonitor: Sendable {
    /// One message as `dbus-monitor` printed it.
    struct Message: CustomStringConvertible {
        var kind: String
        var time: Double
        var sender: String
        var destination: String
        var path: String
        var interface: String
        var member: String
        var body: String

        var description: String { "\(kind) @\(time) \(sender)→\(destination) \(path) \(interface).\(member)\n\(body)" }
        /// The quoted strings of the body, in order.
        var strings: [String] { body.split(separator: "\n").compactMap { line in
            let line = line.trimmingCharacters(in: .whitespaces)
            guard line.hasPrefix("string \""), line.hasSuffix("\"") else { return nil }
            return String(line.dropFirst("string \"".count).dropLast())
        } }
        /// The `uint64` value that follows `string "key"` in the body (an `a{sv}` entry).
        func uint64(_ key: String) -> UInt64? {
            let lines = body.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            guard let index = lines.firstIndex(of: "string \"\(key)\""), index + 1 < lines.count else { return nil }
            guard let range = lines[index + 1].range(of: "uint64 ") else { return nil }
            return UInt64(lines[index + 1][range.upperBound...])
        }
        /// The string or boolean value after `string "key"` (an `a{sv}` entry).
        func value(_ key: String) -> String? {
            let lines = body.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            guard let index = lines.firstIndex(of: "string \"\(key)\""), index + 1 < lines.count else { return nil }
            let line = lines[index + 1]
            if let range = line.range(of: "string \"") { return String(line[range.upperBound...].dropLast()) }
            if let range = line.range(of: "boolean ") { return String(line[range.upperBound...]) }
            if let range = line.range(of: "uint64 ") { return String(line[range.upperBound...]) }
            return nil
        }
    }

    private let process: Spawned

    /// Starts `dbus-monitor` with `rules` and returns once the bus made it a monitor.
    init(_ scenario: Scenario, rules: [String]) async throws {
        process = try await Spawned(try which("dbus-monitor", package: "dbus-bin"), ["--session"] + rules, input: nil,
                                    environment: scenario.environment)
        // `BecomeMonitor` takes the monitor's unique name away: its `NameLost` is the first line.
        let ready = await eventually(within: .seconds(20)) { self.process.stdout.contains("member=NameLost") }
        try #require(ready, "dbus-monitor did not start: \(process.stderr)")
    }

    deinit { process.signal(SIGTERM) }

    /// Every complete message so far (the last one printed may still be incomplete while it is
    /// being written, so callers wait for what they need).
    var messages: [Message] {
        var result: [Message] = []
        for line in process.stdout.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix(" ") {
                if !result.isEmpty { result[result.count - 1].body += line + "\n" }
                continue
            }
            guard let kind = ["signal", "method call", "method return", "error"].first(where: { line.hasPrefix($0 + " ") }) else { continue }
            func field(_ name: String) -> String {
                guard let start = line.range(of: " \(name)=") else { return "" }
                let rest = line[start.upperBound...]
                return String(rest.prefix { $0 != " " && $0 != ";" })
            }
            result.append(Message(kind: kind, time: Double(field("time")) ?? 0, sender: field("sender"), destination: field("destination"),
                                  path: field("path"), interface: field("interface"), member: field("member"), body: ""))
        }
        return result
    }

    /// Waits until `count` messages satisfy `predicate` (at most `timeout` seconds) and returns
    /// those seen.
    func wait(for count: Int = 1, timeout: Double = 20, where predicate: (Message) -> Bool) async -> [Message] {
        var found: [Message] = []
        _ = await eventually(within: .seconds(timeout)) {
            found = self.messages.filter(predicate)
            return found.count >= count
        }
        return found
    }

    /// `LoginStatusChanged` of `service`.
    static func loginStatusChanged(_ service: String) -> (Message) -> Bool {
        { $0.kind == "signal" && $0.member == "LoginStatusChanged" && $0.strings.first == service }
    }

    /// `PropertiesChanged` of `service`'s `Session1` object.
    static func propertiesChanged(_ service: String) -> (Message) -> Bool {
        let path = LoginService.objectPath(of: ServiceName(rawValue: service)!)
        return { $0.kind == "signal" && $0.member == "PropertiesChanged" && $0.path == path }
    }
}

/// The wall clock in seconds since the epoch, as `dbus-monitor` and the token server's log give it.
func wallClock() -> Double { Date().timeIntervalSince1970 }
