// SPDX-License-Identifier: Apache-2.0
import DesktopSandbox
import Foundation
import TestSupport
import Testing

/// The desktop's notification server for a test: the real dunst (Debian's 1.9), on the test's
/// private bus, drawing on an Xvfb display of its own, with a configuration of its own (Debian's
/// defaults, nothing from the person's ~/.config). Nothing else can own
/// org.freedesktop.Notifications on a sandbox's bus (it starts no services), and the launcher
/// checks the owner is this dunst.
///
/// What it received comes from a monitor on the bus, started before dunst owns the name: every
/// Notify call with all its arguments (hint types too), dunst's answer (the id), and the signals
/// dunst sent (ActionInvoked, NotificationClosed) and to whom. `dunstctl history` alone would not
/// do: it lists closed notifications only, without actions or hints.
///
/// How dunst 1.9 differs from what a test may take for granted: it sends ActionInvoked and
/// NotificationClosed to the connection that called Notify alone (a listener on another
/// connection gets neither); its first id is 2; a notification equal to a displayed one (app
/// name, summary, body, urgency) replaces it under a new id, closing the old one with reason 1.
///
/// notification_peers.py `dunst` runs Xvfb and dunst and ends them when its standard input
/// closes (when the test process dies, too); they die with it (`PR_SET_PDEATHSIG`).
final class NotificationServer: Sendable {
    /// A notification dunst took (its Notify answered with an id), as the application sent it,
    /// and what became of it.
    struct Notification: Sendable, CustomStringConvertible {
        enum State: Sendable, Equatable {
            /// Shown (or waiting to be, while dunst is paused).
            case displayed
            /// Closed: `NotificationClosed(id, reason)` was sent (1 expired, 2 dismissed by the
            /// person, 3 closed by CloseNotification, 4 other).
            case closed(reason: UInt32)
            /// A later Notify replaced it, keeping its id (`replaces_id`).
            case replaced
        }

        let id: UInt32
        /// The unique name of the connection that called Notify.
        let sender: String
        let arguments: NotifyArguments
        var state: State = .displayed
        /// The action keys dunst sent back in `ActionInvoked`, in order.
        var invokedActions: [String] = []
        /// What dunst made of it (from its `script` rule), once its script has run.
        var dunstView: DunstView?

        var appName: String { arguments.appName }
        var summary: String { arguments.summary }
        var body: String { arguments.body }
        var actions: [NotifyArguments.Action] { arguments.actions }
        var hints: [String: NotifyArguments.Hint] { arguments.hints }
        var desktopEntry: String? { arguments.desktopEntry }
        var expireTimeout: Int32 { arguments.expireTimeout }
        var isDisplayed: Bool { state == .displayed }

        var description: String {
            "#\(id) from \(sender) [\(state)] \(appName): \(String(reflecting: summary)) \(String(reflecting: body)) actions \(actions) "
                + "hints \(hints.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }) invoked \(invokedActions)"
        }
    }

    /// A notification as dunst read it: what its `script` rule is told (`DUNST_*`).
    struct DunstView: Sendable, Equatable, Decodable {
        let id: String
        let appName: String
        let summary: String
        let body: String
        /// `LOW`, `NORMAL` or `CRITICAL`.
        let urgency: String
        let desktopEntry: String
        let category: String
        let stackTag: String
        /// Seconds until it expires; 0 never.
        let timeout: String

        enum CodingKeys: String, CodingKey {
            case id, appName = "app_name", summary, body, urgency, desktopEntry = "desktop_entry", category, stackTag = "stack_tag", timeout
        }
    }

    /// A closed notification as `dunstctl history` lists it.
    struct HistoryEntry: Sendable, Equatable {
        let id: Int64
        let appName: String
        let summary: String
        let body: String
        let category: String
        let defaultActionName: String
    }

    /// dunst's queues, as `dunstctl count` names them.
    enum Queue: String, Sendable {
        case displayed, history, waiting
    }

    let busAddress: String
    /// The X display dunst draws on (`:N`).
    let display: String
    /// dunst's unique name on the bus: the sender of every signal it sends.
    let ownerName: String
    let dunstProcessID: Int32
    let xvfbProcessID: Int32
    /// The process of notification_peers.py that runs both.
    var launcherProcessID: Int32 { launcher.processID }
    /// Where dunstrc and the logs are (dunst.log, xvfb.log, traffic.jsonl, received.jsonl).
    let directory: String
    private let launcher: PeerProcess
    private let removesDirectory: Bool

    private init(busAddress: String, directory: String, launcher: PeerProcess, removesDirectory: Bool) {
        self.busAddress = busAddress
        self.directory = directory
        self.launcher = launcher
        self.removesDirectory = removesDirectory
        display = launcher.readyWords.first ?? ""
        ownerName = launcher.readyWords.dropFirst().first ?? ""
        dunstProcessID = Int32(launcher.readyWords.dropFirst(2).first ?? "") ?? 0
        xvfbProcessID = Int32(launcher.readyWords.dropFirst(3).first ?? "") ?? 0
    }

    /// Starts Xvfb and dunst on the bus at `busAddress` and returns once dunst owns
    /// org.freedesktop.Notifications there.
    /// - Parameters:
    ///   - directory: for its files; a new temporary one, removed by ``stop()``, when `nil`.
    ///   - bodyMarkup: dunst's `markup = full`, as Debian's dunstrc has it; without, `markup = no`
    ///     (what dunst does with no setting), and GetCapabilities leaves out `body-markup`.
    ///   - defaultTimeout: seconds a low or normal notification that does not say how long it
    ///     lasts (`expire_timeout` -1) stays; 0 (the default here, 10 on a desktop): until closed,
    ///     so that a slow run never sees one expire while it looks at it.
    static func start(busAddress: String, directory: String? = nil, bodyMarkup: Bool = true,
                      defaultTimeout: Int = 0) async throws -> NotificationServer {
        _ = try which("dunst", package: "dunst")
        _ = try which("Xvfb", package: "xvfb")
        let folder = directory ?? FileManager.default.temporaryDirectory.appendingPathComponent("authctl-dunst-" + UUID().uuidString).path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        do {
            let launcher = try await PeerProcess("dunst", bus: busAddress,
                                                 ["--directory", folder, "--markup", bodyMarkup ? "full" : "no", "--timeout", String(defaultTimeout)],
                                                 within: .seconds(60))
            return NotificationServer(busAddress: busAddress, directory: folder, launcher: launcher, removesDirectory: directory == nil)
        } catch {
            let logs = ["dunst.log", "xvfb.log"].map { (try? String(contentsOfFile: folder + "/" + $0, encoding: .utf8)) ?? "" }
            Issue.record("dunst did not start; dunst.log: \(logs[0])\nxvfb.log: \(logs[1])")
            if directory == nil { try? FileManager.default.removeItem(atPath: folder) }
            throw error
        }
    }

    /// Starts it on `sandbox`'s bus, its files in the sandbox's directory (removed with it, even
    /// when the test process dies).
    static func start(in sandbox: DesktopSandbox, bodyMarkup: Bool = true, defaultTimeout: Int = 0) async throws -> NotificationServer {
        try await start(busAddress: sandbox.busAddress, directory: sandbox.directory + "/dunst-" + UUID().uuidString.lowercased(),
                        bodyMarkup: bodyMarkup, defaultTimeout: defaultTimeout)
    }

    /// Stops dunst and Xvfb and waits until they have ended.
    func stop() async {
        await launcher.stop()
        if removesDirectory { try? FileManager.default.removeItem(atPath: directory) }
    }

    /// Whether dunst and Xvfb still run (the launcher reports either's end and stops).
    var isRunning: Bool { launcher.isRunning && !launcher.lines.contains { $0.hasPrefix("exited ") } }

    // MARK: - What it received

    /// Everything the bus routed to and from org.freedesktop.Notifications, in order.
    var traffic: [NotificationsMessage] { NotificationsMessage.read(directory + "/traffic.jsonl") }

    /// Every notification dunst took, oldest first, displayed or not: what the application sent,
    /// the id dunst gave it, and what became of it (closed and why, replaced, actions invoked).
    /// A notification counts once dunst has answered its Notify. Signals count only from dunst
    /// (``ownerName``): another connection's forged ActionInvoked is not dunst's doing.
    func history() async throws -> [Notification] {
        let views = Dictionary(dunstViews.map { ($0.id, $0) }, uniquingKeysWith: { _, later in later })
        var calls: [String: NotifyArguments] = [:]
        var notifications: [Notification] = []
        var current: [UInt32: Int] = [:]
        for message in traffic {
            switch message.kind {
            case .call where message.notify != nil:
                calls["\(message.sender ?? "") \(message.serial)"] = message.notify
            case .return where message.member == "Notify" && message.sender == ownerName:
                guard let destination = message.destination, let replySerial = message.replySerial,
                      let arguments = calls.removeValue(forKey: "\(destination) \(replySerial)"),
                      let id = message.arguments.first?.uint32 else { continue }
                if let index = current[id], notifications[index].state == .displayed { notifications[index].state = .replaced }
                current[id] = notifications.count
                notifications.append(Notification(id: id, sender: destination, arguments: arguments, dunstView: views[String(id)]))
            case .signal where message.sender == ownerName:
                guard let id = message.arguments.first?.uint32, let index = current[id] else { continue }
                if message.isSignal("NotificationClosed"), let reason = message.arguments.dropFirst().first?.uint32 {
                    notifications[index].state = .closed(reason: reason)
                } else if message.isSignal("ActionInvoked"), let key = message.arguments.dropFirst().first?.string {
                    notifications[index].invokedActions.append(key)
                }
            default:
                continue
            }
        }
        return notifications
    }

    /// Waits until dunst has taken `count` notifications that satisfy `condition` (at most
    /// `limit`) and returns them (fewer when the time ran out).
    func waitForNotifications(_ count: Int = 1, within limit: Duration = .seconds(20),
                              where condition: (Notification) -> Bool = { _ in true }) async throws -> [Notification] {
        var found: [Notification] = []
        _ = try await eventually(within: limit) {
            found = try await history().filter(condition)
            return found.count >= count
        }
        return found
    }

    /// Waits until `condition` holds of ``history()`` (at most `limit`); returns whether it did.
    func waitUntil(within limit: Duration = .seconds(20), _ condition: ([Notification]) -> Bool) async throws -> Bool {
        try await eventually(within: limit) { condition(try await history()) }
    }

    /// What dunst's `script` rule was told of each notification, in the order the scripts ran
    /// (dunst runs them detached, so one may be logged a little after Notify was answered).
    var dunstViews: [DunstView] {
        guard let data = FileManager.default.contents(atPath: directory + "/received.jsonl") else { return [] }
        var lines = data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        lines.removeLast()
        return lines.compactMap { try? JSONDecoder().decode(DunstView.self, from: Data($0)) }
    }

    /// The closed notifications as dunst lists them (`dunstctl history`), newest first.
    func dunstHistory() async throws -> [HistoryEntry] {
        let run = try await dunstctl("history")
        struct Listing: Decodable {
            struct Field: Decodable {
                let data: LoggedValue
            }
            let data: [[[String: Field]]]
        }
        let listing = try JSONDecoder().decode(Listing.self, from: Data(run.stdout.utf8))
        return (listing.data.first ?? []).map { fields in
            func text(_ name: String) -> String { fields[name]?.data.string ?? "" }
            return HistoryEntry(id: fields["id"]?.data.integer ?? -1, appName: text("appname"), summary: text("summary"), body: text("body"),
                                category: text("category"), defaultActionName: text("default_action_name"))
        }
    }

    /// How many notifications are in one of dunst's queues (`dunstctl count`).
    func count(_ queue: Queue) async throws -> Int {
        let run = try await dunstctl("count", queue.rawValue)
        guard let number = Int(run.output.trimmingCharacters(in: .whitespaces)) else { throw failure("dunstctl count", run) }
        return number
    }

    // MARK: - What a person does

    /// Chooses the default action of the notification on top of dunst's stack (the most urgent,
    /// then the oldest), as a person's middle click does (`do_action, close_current`), then
    /// dismisses it: dunst sends the application `ActionInvoked(id, "default")`, then
    /// `NotificationClosed(id, 2)`. dunst's choice: the action keyed `default`, else the only
    /// action whatever its key; with several and none `default` it opens its menu (dmenu, nothing
    /// here) and sends no ActionInvoked; with none, nothing. `dunstctl action 0` alone only sends
    /// ActionInvoked; `dunstctl close` then closes the same one. Returns the id of the notification
    /// it chose, as this side expects dunst's order to be; throws when none is displayed.
    @discardableResult
    func invokeDefaultAction() async throws -> UInt32? {
        // Notify is answered before dunst's main loop moves the notification from its waiting
        // queue to the displayed one; `dunstctl action 0` picks from the displayed ones only.
        let shown = try await eventually(within: .seconds(10)) {
            guard try await count(.waiting) == 0 else { return false }
            return try await count(.displayed) > 0
        }
        guard shown else { throw failure("no notification is displayed", nil) }
        // dunst sorts its stack by urgency (most urgent first), then by id (`sort = yes`).
        func onTop(_ first: Notification, _ second: Notification) -> Bool {
            let (firstUrgency, secondUrgency) = (first.arguments.urgency ?? 1, second.arguments.urgency ?? 1)
            return firstUrgency != secondUrgency ? firstUrgency > secondUrgency : first.id < second.id
        }
        let expected = try await history().filter(\.isDisplayed).min(by: onTop)
        try await dunstctl("action", "0")
        try await dunstctl("close")
        return expected?.id
    }

    /// Dismisses every notification, as a person's right click does (`close_all`): each gets
    /// `NotificationClosed(id, 2)`.
    func closeAll() async throws {
        try await dunstctl("close-all")
    }

    /// Pauses dunst (do not disturb): new notifications wait, undisplayed, until it resumes.
    func setPaused(_ paused: Bool) async throws {
        try await dunstctl("set-paused", paused ? "true" : "false")
    }

    /// What dunst answers GetCapabilities with.
    func capabilities() async throws -> [String] {
        GVariantText.strings(try await call("GetCapabilities").stdout)
    }

    /// What dunst answers GetServerInformation with: name, vendor, version, spec version.
    func serverInformation() async throws -> [String] {
        GVariantText.strings(try await call("GetServerInformation").stdout)
    }

    // MARK: - Tools

    private var environment: [String: String] {
        var variables = ProcessInfo.processInfo.environment
        for key in ["DISPLAY", "WAYLAND_DISPLAY"] { variables.removeValue(forKey: key) }
        variables["DBUS_SESSION_BUS_ADDRESS"] = busAddress
        return variables
    }

    /// `dunstctl` (which calls dbus-send, and busctl for `history`) on this bus; throws when it fails.
    @discardableResult
    private func dunstctl(_ arguments: String...) async throws -> Run {
        let run = try await runProcess(try which("dunstctl", package: "dunst"), arguments, input: nil, environment: environment, timeout: 30)
        guard run.status == 0 else { throw failure("dunstctl \(arguments.joined(separator: " "))", run) }
        return run
    }

    private func call(_ method: String) async throws -> Run {
        let run = try await runProcess(try which("gdbus", package: "libglib2.0-bin"),
                                       ["call", "--address", busAddress, "--dest", "org.freedesktop.Notifications",
                                        "--object-path", "/org/freedesktop/Notifications", "--method", "org.freedesktop.Notifications." + method],
                                       input: nil, environment: environment, timeout: 30)
        guard run.status == 0 else { throw failure("gdbus call \(method)", run) }
        return run
    }

    private func failure(_ what: String, _ run: Run?) -> any Error {
        let log = (try? String(contentsOfFile: directory + "/dunst.log", encoding: .utf8)) ?? ""
        Issue.record("\(what) failed: \(run.map(String.init(describing:)) ?? "")\ndunst.log: \(log.suffix(2000))")
        return CocoaError(.fileReadUnknown)
    }
}
