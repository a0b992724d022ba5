// SPDX-License-Identifier: Apache-2.0
import AuthController
@testable import AuthControllerCore
import Foundation
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Passwords typed at a terminal: a pseudo-terminal stands in for the user.
@Suite("Passwords from a terminal")
struct TerminalTests {
    /// Runs `authctl` on a new pseudo-terminal, answering each prompt in `answers` as it
    /// appears. Returns the exit status and everything the terminal showed.
    func runOnTerminal(_ scenario: Scenario, _ arguments: [String], answers: [(prompt: String, reply: String)]) async throws -> (Int32, String) {
        var master: Int32 = -1, slave: Int32 = -1
        #expect(openpty(&master, &slave, nil, nil, nil) == 0)
        defer { close(master) }
        let child = try await Spawned(Scenario.binary, arguments, input: nil, environment: scenario.environment, terminal: slave)
        close(slave)
        var screen = ""
        var buffer = [UInt8](repeating: 0, count: 4096)
        /// Reads what the terminal shows until it shows `text` or ends, at most 30 s.
        func read(until text: String) async {
            var ended = false
            _ = await eventually(within: .seconds(30), pollingEvery: .milliseconds(5)) {
                // Everything there is now, without waiting for more.
                while !ended && !screen.contains(text) {
                    var poller = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
                    guard poll(&poller, 1, 0) >= 0 else { ended = true; break }
                    if poller.revents & Int16(POLLIN) != 0 {
                        let count = Glibc.read(master, &buffer, buffer.count)
                        if count <= 0 { ended = true; break }
                        screen += String(decoding: buffer[0..<count], as: UTF8.self)
                    } else {
                        ended = poller.revents != 0
                        break
                    }
                }
                return ended || screen.contains(text)
            }
        }
        var consumed = screen.startIndex
        for (prompt, reply) in answers {
            await read(until: prompt)
            // Answer only prompts not answered yet.
            if let range = screen.range(of: prompt, range: consumed..<screen.endIndex) { consumed = range.upperBound }
            _ = (reply + "\n").withCString { Glibc.write(master, $0, strlen($0)) }
        }
        await read(until: "\u{0}")  // everything up to end of output
        return (await child.wait().status, screen)
    }

    @Test("a new account is asked twice with echo off; a known one once; a mismatch is 65")
    func typedPasswords() async throws {
        let scenario = try await Scenario()
        var (status, screen) = try await runOnTerminal(scenario, ["sign-in", "tty-user"], answers: [
            ("New password for tty-user: ", "s3cret-typed"), ("Repeat the password: ", "s3cret-typed"),
        ])
        #expect(status == 0, "\(screen)")
        #expect(screen.contains("Signed in to \(scenario.service) as tty-user."))
        #expect(!screen.contains("s3cret-typed"), "the password was echoed: \(screen)")

        (status, screen) = try await runOnTerminal(scenario, ["verify"], answers: [("Password for tty-user: ", "s3cret-typed")])
        #expect(status == 0, "\(screen)")
        #expect(!screen.contains("s3cret-typed"), "\(screen)")
        (status, screen) = try await runOnTerminal(scenario, ["sign-in", "tty-user"], answers: [("Password for tty-user: ", "wrong")])
        #expect(status == 77, "\(screen)")

        (status, screen) = try await runOnTerminal(scenario, ["sign-in", "other"], answers: [
            ("New password for other: ", "one"), ("Repeat the password: ", "two"),
        ])
        #expect(status == 65, "\(screen)")
        #expect(screen.contains("did not match"), "\(screen)")
        #expect(try await scenario.authctl("whoami").output == "tty-user")
    }

    @Test("enrolling at a terminal: each prompt's line ends with a real line break")
    func enrolmentScreen() async throws {
        let scenario = try await Scenario()
        let (status, screen) = try await runOnTerminal(scenario, ["sign-in", "zed@x.org"], answers: [
            ("New password for zed@x.org: ", "s3cret-typed"), ("Repeat the password: ", "s3cret-typed"),
        ])
        #expect(status == 0, "\(screen)")
        // The terminal turns each "\n" into "\r\n"; the typed Enter is not echoed.
        #expect(screen == "New password for zed@x.org: \r\nRepeat the password: \r\nSigned in to \(scenario.service) as zed@x.org.\r\n",
                "\(screen.debugDescription)")
    }

    /// Ctrl-\ is typed, so the terminal itself must send SIGQUIT: `setsid --ctty` makes the
    /// pseudo-terminal the controlling terminal of `authctl`, which leads its foreground group.
    @Test("Ctrl-\\ at the password prompt ends the process at once, with echo back on")
    func quitKeyAtPrompt() async throws {
        let scenario = try await Scenario()
        let terminal = try PseudoTerminal()
        #expect(terminal.echoIsOn, "the terminal starts with echo on")
        let child = try await Spawned(try which("setsid", package: "util-linux"), ["--ctty", Scenario.binary, "sign-in", "tty-quit"],
                                      input: nil, environment: scenario.environmentWithoutBacktraceSettings, terminal: terminal.slave)
        try #require(await terminal.read(within: .seconds(30)) { $0.contains("New password for tty-quit: ") }, "no prompt: \(terminal.screen)")
        terminal.type(Array("half-typ".utf8) + [0x1c])
        let quit = ContinuousClock.now
        let run = await child.wait(timeout: 20)
        let elapsed = ContinuousClock.now - quit
        #expect(run.status == 128 + SIGQUIT, "ends as SIGQUIT would have: \(run.status), \(terminal.screen.debugDescription)")
        #expect(elapsed < .seconds(5), "took \(elapsed)")
        #expect(terminal.echoIsOn, "echo is back on after Ctrl-\\")
        #expect(try await scenario.authctl("status").status == 1, "nothing changed")
    }

    /// A crash report at a terminal (the Swift runtime's, for a SIGABRT) ends without offering
    /// to debug: nothing waits for a key.
    @Test("a crash at a terminal does not wait for a key")
    func crashAtTerminal() async throws {
        let scenario = try await Scenario()
        let terminal = try PseudoTerminal()
        let child = try await Spawned(Scenario.binary, ["sign-in", "tty-crash"], input: nil, environment: scenario.environmentWithoutBacktraceSettings,
                                      terminal: terminal.slave)
        defer { child.signal(SIGKILL) }
        try #require(await terminal.read(within: .seconds(30)) { $0.contains("New password for tty-crash: ") }, "no prompt: \(terminal.screen)")
        child.signal(SIGABRT)
        try #require(await terminal.read(within: .seconds(60)) { $0.contains("Backtrace took") }, "no crash report: \(terminal.screen)")
        let offered = await terminal.read(within: .seconds(2)) { $0.contains("Press space to interact") }
        #expect(!offered, "the crash report waits for a key: \(terminal.screen.debugDescription)")
    }

    /// However the prompt ends, the terminal's echo is back on afterwards.
    @Test("a signal at the password prompt leaves the terminal with echo on", arguments: [SIGINT, SIGQUIT, SIGTERM, SIGHUP])
    func signalAtPrompt(_ signalNumber: Int32) async throws {
        let scenario = try await Scenario()
        var master: Int32 = -1, slave: Int32 = -1
        #expect(openpty(&master, &slave, nil, nil, nil) == 0)
        defer { close(master); close(slave) }
        // The test keeps its slave descriptor open, so the terminal's settings can be read after
        // the child is gone.
        func echoIsOn() -> Bool {
            var settings = termios()
            return tcgetattr(slave, &settings) == 0 && settings.c_lflag & tcflag_t(ECHO) != 0
        }
        // Checked before the child starts: once it runs it may switch echo off at any moment.
        #expect(echoIsOn(), "the terminal starts with echo on")
        let child = try await Spawned(Scenario.binary, ["sign-in", "tty-signal"], input: nil, environment: scenario.environment,
                                      terminal: slave)
        var screen = ""
        var buffer = [UInt8](repeating: 0, count: 4096)
        let prompted = await eventually(within: .seconds(30), pollingEvery: .milliseconds(5)) {
            var poller = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
            if poll(&poller, 1, 0) > 0, poller.revents & Int16(POLLIN) != 0 {
                let count = Glibc.read(master, &buffer, buffer.count)
                if count > 0 { screen += String(decoding: buffer[0..<count], as: UTF8.self) }
            }
            return screen.contains("New password for tty-signal: ")
        }
        try #require(prompted, "no prompt: \(screen)")
        #expect(!echoIsOn(), "echo is off at the prompt")
        child.signal(signalNumber)
        let status = await child.wait().status
        #expect(status == 128 + signalNumber, "the signal ends the process as it would have: \(status)")
        #expect(echoIsOn(), "echo is back on after \(signalNumber)")
        #expect(try await scenario.authctl("status").status == 1, "nothing changed")
    }
}

extension Scenario {
    /// The environment without `SWIFT_BACKTRACE`, which this test process may hold (it links the
    /// command line's start-up code): what `authctl` does without one is what is tested.
    var environmentWithoutBacktraceSettings: [String: String] {
        var variables = environment
        variables.removeValue(forKey: "SWIFT_BACKTRACE")
        return variables
    }
}

/// A pseudo-terminal a test types on and reads from, as a person at a terminal would. Its own
/// end of the program's side stays open, so the settings can be read after the program is gone.
final class PseudoTerminal {
    /// The test's end.
    let master: Int32
    /// The program's end: its standard input, output and error.
    let slave: Int32
    /// Everything the terminal has shown so far.
    private(set) var screen = ""

    init() throws {
        var master: Int32 = -1, slave: Int32 = -1
        guard openpty(&master, &slave, nil, nil, nil) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        self.master = master
        self.slave = slave
    }

    deinit {
        close(master)
        close(slave)
    }

    /// Whether the terminal echoes what is typed.
    var echoIsOn: Bool {
        var settings = termios()
        return tcgetattr(slave, &settings) == 0 && settings.c_lflag & tcflag_t(ECHO) != 0
    }

    /// Types `bytes` as they are (control keys included: 0x03 is Ctrl-C).
    func type(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { Glibc.write(master, $0.baseAddress, $0.count) }
    }

    /// Reads what the terminal shows until `condition` holds for the whole screen, at most
    /// `limit`; returns whether it held.
    func read(within limit: Duration, until condition: (String) -> Bool) async -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        return await eventually(within: limit, pollingEvery: .milliseconds(5)) {
            while true {
                var poller = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, 0) > 0, poller.revents & Int16(POLLIN) != 0 else { break }
                let count = Glibc.read(master, &buffer, buffer.count)
                guard count > 0 else { break }
                screen += String(decoding: buffer[0..<count], as: UTF8.self)
            }
            return condition(screen)
        }
    }
}
