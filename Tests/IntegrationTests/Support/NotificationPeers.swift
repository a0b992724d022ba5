// SPDX-License-Identifier: Apache-2.0
import DesktopSandbox
import Foundation
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// One program of notification_peers.py, running for a test: it prints `ready …` once connected
/// and ends when its standard input closes, so a test that dies (SIGKILL included) leaves none
/// behind. Orders go to its standard input, one a line; it confirms each on stdout.
final class PeerProcess: Sendable {
    let command: String
    /// The words after `ready` on its first line.
    let readyWords: [String]
    private let process: Spawned

    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("notification_peers.py").path

    /// Starts `notification_peers.py COMMAND --bus BUS ARGUMENTS…` and returns once it said
    /// `ready`, at most `limit` later.
    init(_ command: String, bus: String, _ arguments: [String], within limit: Duration = .seconds(30)) async throws {
        self.command = command
        var environment = ProcessInfo.processInfo.environment
        for key in ["DISPLAY", "WAYLAND_DISPLAY"] { environment.removeValue(forKey: key) }
        environment["DBUS_SESSION_BUS_ADDRESS"] = bus
        let process = try await Spawned(debianPython, [Self.script, command, "--bus", bus] + arguments, input: nil, environment: environment,
                                        leadsProcessGroup: true, holdsInputOpen: true, pipesOutput: true)
        self.process = process
        let firstLine = { PeerProcess.completeLines(process.stdout).first }
        _ = await eventually(within: limit, pollingEvery: .milliseconds(10)) { firstLine() != nil || process.hasEnded }
        guard let first = firstLine(), first == "ready" || first.hasPrefix("ready ") else {
            process.closeInput()
            process.signal(SIGKILL)
            Issue.record("notification_peers.py \(command) did not start within \(limit): \(process.stdout)\n\(process.stderr)")
            throw CocoaError(.fileReadUnknown)
        }
        readyWords = first.split(separator: " ").dropFirst().map(String.init)
    }

    var stdout: String { process.stdout }
    var stderr: String { process.stderr }
    /// The complete lines of stdout so far.
    var lines: [String] { Self.completeLines(stdout) }

    private static func completeLines(_ text: String) -> [String] {
        text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
    }

    var isRunning: Bool { !process.hasEnded }
    var processID: Int32 { process.pid }

    /// The first line after the `ready` one that satisfies `condition`, once printed, at most
    /// `limit` later.
    func line(within limit: Duration = .seconds(20), where condition: (String) -> Bool) async -> String? {
        var found: String?
        _ = await eventually(within: limit, pollingEvery: .milliseconds(5)) {
            found = lines.dropFirst().first(where: condition)
            return found != nil
        }
        return found
    }

    /// Sends one order and waits for the line that confirms it (the `confirmation` prefix).
    func order(_ text: String, confirmedBy confirmation: String, within limit: Duration = .seconds(20)) async throws {
        let before = lines.count
        try process.write(Array((text + "\n").utf8))
        let confirmed = await eventually(within: limit, pollingEvery: .milliseconds(5)) {
            lines.dropFirst(before).contains { $0.hasPrefix(confirmation) }
        }
        guard confirmed else {
            Issue.record("notification_peers.py \(command) did not confirm `\(text)`: \(stdout)\n\(stderr)")
            throw CocoaError(.fileReadUnknown)
        }
    }

    /// Closes its standard input, which ends it. It is killed if it has not ended within
    /// `grace` (the dunst launcher stops dunst and Xvfb first, within a few seconds).
    func stop(grace: Duration = .seconds(10)) async {
        closeInput()
        guard await !eventually(within: grace, { process.hasEnded }) else { return }
        // One that did not end when its input closed is stuck; the dunst launcher's daemons still
        // get their SIGTERM (PR_SET_PDEATHSIG).
        process.signal(SIGKILL)
        _ = await process.wait(timeout: 5)
    }

    /// Closes its standard input without waiting.
    func closeInput() { process.closeInput() }
}

/// A JSON value of a message logged by notification_peers.py.
enum LoggedValue: Sendable, Equatable, Decodable, CustomStringConvertible {
    case string(String)
    case number(Double)
    case bool(Bool)
    case array([LoggedValue])
    case object([String: LoggedValue])
    case null

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .null }
        else if let value = try? container.decode(Bool.self) { self = .bool(value) }
        else if let value = try? container.decode(Double.self) { self = .number(value) }
        else if let value = try? container.decode(String.self) { self = .string(value) }
        else if let value = try? container.decode([LoggedValue].self) { self = .array(value) }
        else { self = .object(try container.decode([String: LoggedValue].self)) }
    }

    var string: String? { if case .string(let value) = self { value } else { nil } }
    var integer: Int64? { if case .number(let value) = self, value == value.rounded() { Int64(value) } else { nil } }
    var uint32: UInt32? { integer.flatMap { UInt32(exactly: $0) } }

    var description: String {
        switch self {
        case .string(let value): String(reflecting: value)
        case .number(let value): value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
        case .bool(let value): String(value)
        case .array(let values): "[" + values.map(\.description).joined(separator: ", ") + "]"
        case .object(let entries): "{" + entries.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "}"
        case .null: "null"
        }
    }
}

/// The arguments of one `Notify` call, by name.
struct NotifyArguments: Sendable, Equatable, Decodable {
    /// A hint's D-Bus type (`s`, `y`, `b`…) and value: an urgency is a byte, and a server that
    /// reads it as one ignores an `i`.
    struct Hint: Sendable, Equatable, Decodable, CustomStringConvertible {
        let type: String
        let value: LoggedValue
        var description: String { "\(type) \(value)" }
    }

    /// An action: the key the server sends back in `ActionInvoked`, and the label it shows.
    struct Action: Sendable, Equatable, CustomStringConvertible {
        let key: String
        let label: String
        var description: String { "\(key): \(label)" }
    }

    let appName: String
    let replacesID: UInt32
    let appIcon: String
    let summary: String
    let body: String
    /// As sent: key, label, key, label…
    let flatActions: [String]
    let hints: [String: Hint]
    let expireTimeout: Int32

    enum CodingKeys: String, CodingKey {
        case appName = "app_name", replacesID = "replaces_id", appIcon = "app_icon", summary, body, flatActions = "actions", hints,
             expireTimeout = "expire_timeout"
    }

    /// The actions in pairs (an odd last key has an empty label).
    var actions: [Action] {
        stride(from: 0, to: flatActions.count, by: 2).map { Action(key: flatActions[$0], label: $0 + 1 < flatActions.count ? flatActions[$0 + 1] : "") }
    }

    /// The `urgency` hint's byte: 0 low, 1 normal, 2 critical.
    var urgency: Int64? { hints["urgency"]?.value.integer }
    /// The `desktop-entry` hint.
    var desktopEntry: String? { hints["desktop-entry"]?.value.string }
}

/// One D-Bus message of the notification interface as notification_peers.py logged it: a call a
/// server received, or what the monitor of a dunst saw the bus route (calls, their replies,
/// signals, and `NameOwnerChanged` of org.freedesktop.Notifications).
struct NotificationsMessage: Sendable, Decodable, CustomStringConvertible {
    enum Kind: String, Sendable, Decodable {
        case call, `return`, error, signal, other
    }

    let time: Double
    let kind: Kind
    let sender: String?
    /// `nil` for a signal to everyone (a broadcast).
    let destination: String?
    let path: String?
    let interface: String?
    /// For a reply, the member of the call it answers.
    let member: String?
    let serial: UInt32
    let replySerial: UInt32?
    let signature: String
    let arguments: [LoggedValue]
    let errorName: String?
    /// A `Notify` call's arguments by name.
    let notify: NotifyArguments?
    /// For a signal a client received: whether it was addressed to that client alone.
    let unicast: Bool?

    enum CodingKeys: String, CodingKey {
        case time, kind = "type", sender, destination, path, interface, member, serial, replySerial = "reply_serial", signature,
             arguments = "args", errorName = "error_name", notify, unicast
    }

    var description: String {
        "\(kind.rawValue) \(member ?? "?") \(sender ?? "?")→\(destination ?? "*") \(arguments.map(\.description).joined(separator: ", "))"
    }

    /// Whether this is the signal `member` (`ActionInvoked`, `NotificationClosed`) of the
    /// notification interface.
    func isSignal(_ member: String) -> Bool {
        kind == .signal && interface == "org.freedesktop.Notifications" && self.member == member
    }

    /// The messages of a JSON-lines log, in order; a line still being written is left out.
    static func read(_ path: String) -> [NotificationsMessage] {
        guard let data = FileManager.default.contents(atPath: path) else { return [] }
        return decodeLines(data)
    }

    static func decodeLines(_ data: Data) -> [NotificationsMessage] {
        let decoder = JSONDecoder()
        var messages: [NotificationsMessage] = []
        var lines = data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        lines.removeLast()  // after the last newline: empty, or a line not yet complete
        for line in lines where !line.isEmpty {
            if let message = try? decoder.decode(NotificationsMessage.self, from: Data(line)) { messages.append(message) }
        }
        return messages
    }
}

/// A peer of notification_peers.py on a test's bus: a notification server that misbehaves (or
/// records), or a process that forges the server's signals. Its log of the calls it received is
/// in the sandbox's directory, so it goes with the sandbox.
final class NotificationPeer: Sendable {
    /// The capabilities GNOME Shell announces.
    static let standardCapabilities = ["actions", "body", "body-markup", "body-hyperlinks", "icon-static", "persistence"]

    /// Its unique name on the bus.
    let uniqueName: String
    let process: PeerProcess
    private let log: String

    private init(process: PeerProcess, log: String) {
        self.process = process
        self.log = log
        uniqueName = process.readyWords.first ?? ""
    }

    private static func start(_ command: String, in sandbox: DesktopSandbox, _ arguments: [String]) async throws -> NotificationPeer {
        let log = sandbox.directory + "/\(command)-\(UUID().uuidString.lowercased()).jsonl"
        let process = try await PeerProcess(command, bus: sandbox.busAddress, ["--log", log] + arguments)
        return NotificationPeer(process: process, log: log)
    }

    /// Owns org.freedesktop.Notifications, answers everything (Notify with ids 1, 2…;
    /// CloseNotification with `NotificationClosed(id, 3)`) and logs every call. Its signals go to
    /// the notification's caller alone, as dunst's do, or with `broadcast` to everyone, as GNOME
    /// Shell's do.
    static func recordingServer(in sandbox: DesktopSandbox, capabilities: [String] = standardCapabilities,
                                broadcast: Bool = false) async throws -> NotificationPeer {
        try await start("recording-server", in: sandbox,
                        ["--capabilities", capabilities.joined(separator: ",")] + (broadcast ? ["--broadcast"] : []))
    }

    /// Owns org.freedesktop.Notifications and never answers the calls of `hanging` (it answers
    /// the others); ``answerPendingCalls()`` answers them after all.
    static func hungServer(in sandbox: DesktopSandbox, hanging: [String] = ["Notify"]) async throws -> NotificationPeer {
        try await start("hung-server", in: sandbox, ["--hang", hanging.joined(separator: ",")])
    }

    /// Owns org.freedesktop.Notifications, answers Notify, and then (or, with `beforeReply`,
    /// first) sends the caller `count` ActionInvoked for its ids and random ones.
    static func floodServer(in sandbox: DesktopSandbox, count: Int = 5000, beforeReply: Bool = false) async throws -> NotificationPeer {
        try await start("flood-server", in: sandbox, ["--count", String(count)] + (beforeReply ? ["--before-reply"] : []))
    }

    /// A connection that owns no name and sends `ActionInvoked(id, key)` at path
    /// /org/freedesktop/Notifications, to `destination` and to everyone: at once for `id`, later
    /// with ``forgeAction(id:key:)``.
    static func forger(in sandbox: DesktopSandbox, id: UInt32? = nil, destination: String? = nil, key: String = "default") async throws -> NotificationPeer {
        var arguments = ["--key", key]
        if let id { arguments += ["--id", String(id)] }
        if let destination { arguments += ["--destination", destination] }
        let process = try await PeerProcess("forge-action", bus: sandbox.busAddress, arguments)
        if id != nil { _ = await process.line { $0.hasPrefix("sent action") } }
        return NotificationPeer(process: process, log: "/dev/null")
    }

    /// Every call the server received so far, in order.
    var calls: [NotificationsMessage] { NotificationsMessage.read(log) }
    /// The `Notify` calls the server received so far.
    var notifyCalls: [NotifyArguments] { calls.compactMap(\.notify) }

    /// Waits until the server has received `count` calls that satisfy `condition` (at most
    /// `limit`), and returns those received.
    func waitForCalls(_ count: Int = 1, within limit: Duration = .seconds(20),
                      where condition: (NotificationsMessage) -> Bool = { _ in true }) async -> [NotificationsMessage] {
        var found: [NotificationsMessage] = []
        _ = await eventually(within: limit) {
            found = calls.filter(condition)
            return found.count >= count
        }
        return found
    }

    /// Sends `ActionInvoked(id, key)`: from the server, to the notification's caller (or everyone);
    /// from a forger, to its destination and everyone. Returns once it is on the bus.
    func forgeAction(id: UInt32, key: String = "default") async throws {
        try await process.order("action \(id) \(key)", confirmedBy: "sent action \(id)")
    }

    /// Sends `NotificationClosed(id, reason)` as ``forgeAction(id:key:)`` sends ActionInvoked.
    func forgeClosed(id: UInt32, reason: UInt32 = 2) async throws {
        try await process.order("closed \(id) \(reason)", confirmedBy: "sent closed \(id)")
    }

    /// The hung server answers the calls it kept (Notify with an id), as a server that was slow.
    func answerPendingCalls() async throws {
        try await process.order("answer", confirmedBy: "answered ")
    }

    /// Waits until the flood server has sent its flood for `notifications` Notify calls.
    func waitForFloods(_ notifications: Int = 1, within limit: Duration = .seconds(60)) async -> Bool {
        await eventually(within: limit) { process.lines.filter { $0.hasPrefix("flooded ") }.count >= notifications }
    }

    /// The server exits at once, as a crashed one does: pending calls are never answered and the
    /// bus releases the name. Returns once it has ended.
    func vanish() async throws {
        try await process.order("exit", confirmedBy: "exiting")
        let ended = await eventually(within: .seconds(10)) { !process.isRunning }
        #expect(ended, "the \(process.command) did not exit")
    }

    func stop() async { await process.stop() }
}

/// An application's connection to the notification server, from notification_peers.py `notify`:
/// it calls Notify once and collects every signal of the notification interface it receives,
/// whether addressed to it or to everyone.
final class NotificationClient: Sendable {
    let process: PeerProcess
    /// Its unique name on the bus.
    let uniqueName: String

    /// Connects to `bus` and calls Notify with these arguments. `hints` are GVariant text
    /// (`"'authctl'"`, `"byte 2"`, `"true"`).
    init(bus: String, appName: String = "notification-client", summary: String = "A summary", body: String = "",
         actions: [(key: String, label: String)] = [], hints: [String: String] = [:], expireTimeout: Int32 = -1,
         replacesID: UInt32 = 0) async throws {
        var arguments = ["--app-name", appName, "--summary", summary, "--body", body, "--expire-timeout", String(expireTimeout),
                         "--replaces-id", String(replacesID)]
        for action in actions { arguments += ["--action", action.key, action.label] }
        for (name, value) in hints.sorted(by: { $0.key < $1.key }) { arguments += ["--hint", "\(name)=\(value)"] }
        process = try await PeerProcess("notify", bus: bus, arguments)
        uniqueName = process.readyWords.first ?? ""
    }

    /// The id the server answered Notify with, once it answered (at most `limit` later).
    func id(within limit: Duration = .seconds(20)) async -> UInt32? {
        await process.line(within: limit) { $0.hasPrefix("id ") }.flatMap { UInt32($0.dropFirst(3)) }
    }

    /// The signals received so far, in order.
    var signals: [NotificationsMessage] {
        let lines = process.lines.filter { $0.hasPrefix("signal ") }.map { $0.dropFirst("signal ".count) + "\n" }
        return NotificationsMessage.decodeLines(Data(lines.joined().utf8))
    }

    /// Waits until `count` signals that satisfy `condition` have arrived (at most `limit`).
    func waitForSignals(_ count: Int = 1, within limit: Duration = .seconds(20),
                        where condition: (NotificationsMessage) -> Bool) async -> [NotificationsMessage] {
        var found: [NotificationsMessage] = []
        _ = await eventually(within: limit) {
            found = signals.filter(condition)
            return found.count >= count
        }
        return found
    }

    /// Calls CloseNotification(id) and returns once the server answered.
    func close(id: UInt32) async throws {
        try await process.order("close \(id)", confirmedBy: "closed \(id)")
    }

    /// Calls Notify again with the same arguments; returns the new id.
    func notifyAgain() async throws -> UInt32? {
        let before = process.lines.filter { $0.hasPrefix("id ") }.count
        try await process.order("notify", confirmedBy: "id ")
        _ = await eventually(within: .seconds(20)) { process.lines.filter { $0.hasPrefix("id ") }.count > before }
        return process.lines.filter { $0.hasPrefix("id ") }.dropFirst(before).first.flatMap { UInt32($0.dropFirst(3)) }
    }

    func stop() async { await process.stop() }
}

/// The traffic of org.freedesktop.Notifications on a bus, from a monitor (notification_peers.py
/// `monitor`): every call of the interface, the replies to them, its signals (who sent them, to
/// whom), and who owns the name. For a server other than dunst, whose own traffic
/// ``NotificationServer`` logs.
final class NotificationBusMonitor: Sendable {
    private let process: PeerProcess
    private let log: String

    init(in sandbox: DesktopSandbox) async throws {
        log = sandbox.directory + "/notification-traffic-\(UUID().uuidString.lowercased()).jsonl"
        process = try await PeerProcess("monitor", bus: sandbox.busAddress, ["--log", log])
    }

    var messages: [NotificationsMessage] { NotificationsMessage.read(log) }

    /// Waits until `count` messages satisfy `condition` (at most `limit`) and returns those seen.
    func wait(for count: Int = 1, within limit: Duration = .seconds(20),
              where condition: (NotificationsMessage) -> Bool) async -> [NotificationsMessage] {
        var found: [NotificationsMessage] = []
        _ = await eventually(within: limit) {
            found = messages.filter(condition)
            return found.count >= count
        }
        return found
    }

    func stop() async { await process.stop() }
}
