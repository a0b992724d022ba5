import AuthController
@testable import AuthControllerCore
import Foundation
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

    /// However the prompt ends, the terminal's echo is back on afterwards.
    @Test("a signal at the password prompt leaves the terminal with echo on", arguments: [SIGINT, SIGTERM, SIGHUP])
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
