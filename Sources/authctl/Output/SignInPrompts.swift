// SPDX-License-Identifier: Apache-2.0
import AuthControllerCore
import Dispatch
import Synchronization
import SystemPackage

/// What the person sees of a sign-in at an OpenID provider on the command line: the
/// authorization URL on stderr and the browser started (`$BROWSER`, else `xdg-open`), or the
/// device code's lines; at a terminal, the address the browser ends on may be pasted instead.
struct SignInPrompts: SignInPresenter {
    /// Whether a browser on this machine can show a page to the person: `BROWSER` is set, or a
    /// graphical session (`DISPLAY`, `WAYLAND_DISPLAY`) is and this is not an SSH session — over
    /// SSH a forwarded display puts the browser on this machine, whose 127.0.0.1 the person's
    /// own browser cannot reach.
    static var canOpenBrowser: Bool {
        if ProcessEnvironment.value("BROWSER") != nil { return true }
        if ProcessEnvironment.value("SSH_CONNECTION") != nil || ProcessEnvironment.value("SSH_TTY") != nil { return false }
        return ProcessEnvironment.value("DISPLAY") != nil || ProcessEnvironment.value("WAYLAND_DISPLAY") != nil
    }

    /// How long a browser command has to fail for the sign-in to learn of it.
    static let browserFailureWindow = Duration.seconds(5)

    /// Whether lines may be read from the terminal (`--no-prompt` was not given).
    let mayPrompt: Bool
    private let browser = BrowserWatch()

    init(mayPrompt: Bool) {
        self.mayPrompt = mayPrompt
    }

    /// Not in the background: reading the terminal there would stop authctl (SIGTTIN).
    var acceptsPastedAddresses: Bool { mayPrompt && Terminal.standardInput.isTerminal && Terminal.standardInput.isForeground }

    func showAuthorizationPage(_ url: String) throws(AuthError) {
        guard Self.canOpenBrowser else {
            try? Output.personal(["To sign in, open this address in a browser on any machine: \(url)"])
            return
        }
        // Unwritten, the browser still opens the page: the sign-in goes on.
        try? Output.personal(["To sign in, continue in your browser at \(url)"])
        // The browser is the person's: started, watched only for a failure at once.
        let command = ProcessEnvironment.value("BROWSER") ?? "xdg-open"
        browser.start(Task { await DetachedProcess.startWatched([command, url], within: Self.browserFailureWindow) }, command: command)
    }

    func browserFailure() async -> String? {
        guard let (watch, command) = browser.started else { return nil }
        let outcome = await withTaskCancellationHandler { await watch.value } onCancel: { watch.cancel() }
        let failure: String
        switch outcome {
        case .running, .exited(0): return nil
        case .couldNotStart(let why): failure = "could not start the browser \(command) (\(why))"
        case .exited(let status): failure = "the browser \(command) could not open the page (it exited with status \(status))"
        case .killed(let signal): failure = "the browser \(command) could not open the page (it was killed by signal \(signal))"
        }
        Output.diagnostic(failure)
        return failure
    }

    func pastedAddresses() -> AsyncStream<String> {
        try? Output.personal(["Or paste here the address your browser shows once you have signed in:"])
        return PastedLines.fromStandardInput()
    }

    func refusedPastedAddress(_ reason: String) {
        Output.diagnostic(reason)
    }

    func showDeviceCode(_ code: DeviceCode) throws(AuthError) {
        var lines = ["To sign in, open \(code.verificationURI) and enter the code \(code.userCode)"]
        if let complete = code.verificationURIComplete { lines.append("Or open \(complete)") }
        // A phone's camera reads the page from the terminal; a log or a pipe has no use for it.
        if Terminal(descriptor: .standardError).isTerminal, let symbol = try? QRCode(encoding: code.verificationURIComplete ?? code.verificationURI) {
            lines += QRCodeArt.lines(for: symbol, colored: ProcessEnvironment.value("NO_COLOR") == nil)
        }
        // Nobody can sign in with a code nobody saw: waiting for it would only end at --timeout.
        do throws(Output.WriteFailure) {
            try Output.personal(lines)
        } catch {
            throw AuthError.settingsIO("cannot show the sign-in code on standard error (\(error.errno.description)); nothing was stored")
        }
    }
}

/// The browser a sign-in started, and the task watching it.
private final class BrowserWatch: Sendable {
    private let state = Mutex<(watch: Task<DetachedProcess.Watched, Never>, command: String)?>(nil)

    func start(_ watch: Task<DetachedProcess.Watched, Never>, command: String) {
        state.withLock { $0 = (watch, command) }
    }

    var started: (Task<DetachedProcess.Watched, Never>, String)? { state.withLock { $0.map { ($0.watch, $0.command) } } }
}

/// Lines typed or pasted at the terminal on standard input, read on a thread of their own (a
/// read blocks until Enter). A line longer than the longest address taken is cut there, and
/// the rest of it is dropped, so a runaway paste cannot grow memory.
enum PastedLines {
    static let longest = 8192

    static func fromStandardInput() -> AsyncStream<String> {
        AsyncStream { continuation in
            DispatchQueue(label: "io.github.authctl.pasted-lines").async {
                var line: [UInt8] = []
                var overlong = false
                var buffer = [UInt8](repeating: 0, count: 4096)
                while true {
                    let count = (try? buffer.withUnsafeMutableBytes { try FileDescriptor.standardInput.read(into: $0, retryOnInterrupt: true) }) ?? 0
                    if count <= 0 { break }
                    for byte in buffer[0..<count] {
                        if byte == UInt8(ascii: "\n") {
                            // One byte past the longest: the reader then refuses it as too long.
                            continuation.yield(String(decoding: line, as: UTF8.self) + (overlong ? "…" : ""))
                            line.removeAll(keepingCapacity: true)
                            overlong = false
                        } else if line.count < longest {
                            line.append(byte)
                        } else {
                            overlong = true
                        }
                    }
                }
                // Ctrl-D: said once, so that a person who goes on pasting is not left waiting.
                Output.diagnostic("standard input has ended: no more addresses can be pasted; the sign-in waits for the browser until --timeout")
                continuation.finish()
            }
        }
    }
}
