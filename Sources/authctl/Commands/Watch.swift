// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthControllerCore
import SystemPackage

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
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
        if let timeout, !(timeout > 0 && timeout <= 315_360_000) {
            throw ValidationError("--timeout takes a number of seconds greater than 0 and at most 315360000 (ten years)")
        }
    }

    func run() async throws {
        let controller = try global.makeController()
        try controller.checkSettings()
        // Subscribe before reading the current state, so no change falls in between.
        let listener = try LoginEventListener(service: controller.service)
        let signals = ProcessSignal.deliveries(of: [.interrupt, .terminate])
        let first = initial ? try controller.initialEvent() : nil
        let loop = WatchLoop(json: json, count: count, hook: command.map { EventHook(command: $0) },
                             environment: ProcessEnvironment.all)
        let (ending, seen) = await loop.run(listener: listener, first: first, timeout: timeout, signals: signals)
        switch ending {
        case .failed(let error): throw error
        case .writeFailed(let failure): throw failure
        case .timedOut: if let count, seen < count { throw ExitCode(ExitStatus.no) }
        case .counted, .signalled, .readerGone, .listenerEnded: break
        }
    }

    static func text(_ event: LoginEvent) -> String {
        let user = event.account?.rawValue ?? "(nobody)"
        let name = event.name.isEmpty ? "" : " (\(event.name))"
        let previous = event.previousAccount.map { ", after \($0)" } ?? ""
        return "\(Timestamp.rfc3339(event.timestamp)) \(event.service) \(event.status.rawValue) \(user)\(name) [\(event.reason.rawValue)\(previous)] #\(event.sequence)"
    }
}

/// One `watch`, in structured concurrency: one task handles the events one at a time, in
/// order (print, then run the hook); the timer, the signals and the reader of stdout only end
/// it. Whatever ends first wins; the others are cancelled, the listener is stopped, and a
/// running hook is stopped too unless `--count` was reached.
private struct WatchLoop: Sendable {
    enum Ending: Sendable {
        case counted, timedOut, signalled, listenerEnded
        /// Nobody reads stdout any more: a quiet, successful end.
        case readerGone
        case writeFailed(Output.WriteFailure)
        case failed(AuthError)
    }

    /// What each task of the group reports.
    private enum Report: Sendable {
        /// The event task: how many events it handled, and why it stopped.
        case handled(Int, Ending)
        case ended(Ending)
        /// A task that was cancelled before its ending came.
        case cancelled
    }

    let json: Bool
    let count: Int?
    let hook: EventHook?
    let environment: [String: String]

    /// Returns why watching ended and how many events were handled.
    func run(listener: LoginEventListener, first: LoginEvent?, timeout: Double?,
             signals: AsyncStream<ProcessSignal>) async -> (Ending, seen: Int) {
        await withTaskGroup(of: Report.self) { group in
            group.addTask { await handleEvents(first: first, from: listener) }
            if let timeout {
                group.addTask {
                    do { try await Task.sleep(for: .seconds(timeout)) } catch { return .cancelled }
                    return .ended(.timedOut)
                }
            }
            group.addTask {
                for await _ in signals { return .ended(.signalled) }
                return .cancelled
            }
            group.addTask {
                await FileDescriptor.standardOutput.readerGone()
                return Task.isCancelled ? .cancelled : .ended(.readerGone)
            }
            var ending: Ending?
            var seen = 0
            while let report = await group.next() {
                switch report {
                case .handled(let count, let reason):
                    seen = count
                    if ending == nil { ending = reason }
                case .ended(let reason):
                    if ending == nil { ending = reason }
                case .cancelled:
                    continue
                }
                guard let ending else { continue }
                if case .counted = ending {} else {
                    // A running --exec command must not keep an ended watch alive.
                    hook?.terminate()
                }
                listener.stop()
                group.cancelAll()
            }
            return (ending ?? .listenerEnded, seen)
        }
    }

    /// Prints each event and runs the hook, until `--count` is reached, the listener ends, or
    /// the task is cancelled (events still buffered are then dropped).
    private func handleEvents(first: LoginEvent?, from listener: LoginEventListener) async -> Report {
        var seen = 0
        func handle(_ event: LoginEvent) async -> Ending? {
            if Task.isCancelled { return .listenerEnded }
            do {
                if json { try Output.json(EventDocument(event)) } else { try Output.line(Watch.text(event)) }
            } catch {
                return error.readerGone ? .readerGone : .writeFailed(error)
            }
            if let hook {
                do { _ = try await hook.run(for: event, environment: environment) } catch { return .failed(error) }
            }
            seen += 1
            if let count, seen >= count { return .counted }
            return nil
        }
        if let first, let ending = await handle(first) { return .handled(seen, ending) }
        for await event in listener.events {
            if let ending = await handle(event) { return .handled(seen, ending) }
        }
        // The stream ended without a stop: the bus went away, an unavailable failure.
        return .handled(seen, listener.failure.map(Ending.failed) ?? .listenerEnded)
    }
}
