import ArgumentParser
import AuthController
import Foundation

struct Watch: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a line for each login status change of the service, as it happens.",
        discussion: """
            Listens for the LoginStatusChanged D-Bus signal of the service. With --exec, runs the \
            command with /bin/sh -c for each event, one at a time, with AUTHCTL_SERVICE, \
            AUTHCTL_SIGNED_IN, AUTHCTL_USER, AUTHCTL_REASON and AUTHCTL_SEQUENCE in its environment.
            Exit status: 0 after --count events, on --timeout alone, or on SIGINT/SIGTERM; \
            1 when --timeout passes before --count events.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Flag(help: "Print one JSON object per line.")
    var json = false

    @Flag(help: "First print the current state, as an event with reason `initial`.")
    var initial = false

    @Option(help: ArgumentHelp("Stop after this many events.", valueName: "n"))
    var count: Int?

    @Option(help: ArgumentHelp("Stop after this many seconds.", valueName: "seconds"))
    var timeout: Double?

    @Option(name: .customLong("exec"), help: ArgumentHelp("Run this shell command for each event.", valueName: "command"))
    var command: String?

    func validate() throws {
        if let count, count < 1 { throw ValidationError("--count takes a whole number of at least 1") }
        if let timeout, !(timeout > 0) { throw ValidationError("--timeout takes a number of seconds greater than 0") }
    }

    func run() throws {
        let controller = try global.makeController()
        try controller.checkSettings()
        // Subscribe before reading the current state, so no change falls in between.
        let listener = try LoginEventListener(service: controller.service)
        let loop = WatchLoop(listener: listener, json: json, count: count, hook: command.map { EventHook(command: $0) })
        var timer: DispatchWorkItem?
        if let timeout {
            let work = DispatchWorkItem { loop.end(.timedOut) }
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: work)
            timer = work
        }
        defer { timer?.cancel() }
        let signals = [SIGINT, SIGTERM].map { signalNumber in
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler { loop.end(.signalled) }
            source.resume()
            return source
        }
        defer { for source in signals { source.cancel() } }

        let initialEvent = initial ? try controller.initialEvent() : nil
        let finished = DispatchSemaphore(value: 0)
        Task {
            await loop.consume(first: initialEvent)
            finished.signal()
        }
        finished.wait()
        if let error = loop.failure { throw error }
        if loop.ending == .timedOut, let count, loop.seen < count { throw ExitCode(1) }
    }

    static func text(_ event: LoginEvent) -> String {
        let user = event.user?.rawValue ?? "(nobody)"
        let name = event.name.isEmpty ? "" : " (\(event.name))"
        let previous = event.previousUser.map { ", after \($0)" } ?? ""
        return "\(Timestamp.rfc3339(microseconds: event.timestamp)) \(event.service) \(event.status.rawValue) \(user)\(name) [\(event.reason.rawValue)\(previous)] #\(event.sequence)"
    }

    static func json(_ event: LoginEvent) -> String {
        JSON.orderedObject([
            ("service", .string(event.service.rawValue)),
            ("signedIn", .bool(event.isSignedIn)),
            ("user", .optional(event.user?.rawValue)),
            ("reason", .string(event.reason.rawValue)),
            ("name", .string(event.name)),
            ("timestamp", .string(Timestamp.rfc3339(microseconds: event.timestamp))),
            ("sequence", .number(event.sequence)),
        ]).serialized
    }
}

/// The state of one `watch`: events are handled one at a time, in order, on one task; the
/// timer and signal handlers only end it.
private final class WatchLoop: @unchecked Sendable {
    enum Ending { case counted, timedOut, signalled }

    private let listener: LoginEventListener
    private let json: Bool
    private let count: Int?
    private let hook: EventHook?
    private let environment = ProcessInfo.processInfo.environment
    private let lock = NSLock()
    private var endingValue: Ending?
    private(set) var seen = 0
    private(set) var failure: AuthError?

    init(listener: LoginEventListener, json: Bool, count: Int?, hook: EventHook?) {
        self.listener = listener
        self.json = json
        self.count = count
        self.hook = hook
    }

    var ending: Ending? { lock.withLock { endingValue } }

    func end(_ reason: Ending) {
        lock.withLock { if endingValue == nil { endingValue = reason } }
        listener.stop()
        // A running --exec command must not keep a timed-out or interrupted watch alive.
        if reason != .counted { hook?.terminate() }
    }

    /// Prints the event and runs the hook; returns whether watching is over (`--count` reached,
    /// or ended by a timeout or signal, after which buffered events are dropped).
    func handle(_ event: LoginEvent) async throws(AuthError) -> Bool {
        if ending != nil { return true }
        Output.line(json ? Watch.json(event) : Watch.text(event))
        if let hook { _ = try await hook.run(for: event, environment: environment) }
        seen += 1
        return count.map { seen >= $0 } ?? false
    }

    func consume(first: LoginEvent?) async {
        do throws(AuthError) {
            if let first, try await handle(first) { return }
            for await event in listener.events where try await handle(event) {
                end(.counted)
                break
            }
        } catch {
            failure = error
            listener.stop()
        }
    }
}
