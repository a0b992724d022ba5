// SPDX-License-Identifier: Apache-2.0
internal import CGLib
internal import CLibsoup
import Dispatch
import Synchronization

/// The browser flow's one-shot HTTP listener on 127.0.0.1 (RFC 8252 §7.3), a libsoup server on a
/// main loop of its own. It answers every request: the first `GET /callback` whose `state` is the
/// one expected is handed to ``callback(timeout:)`` and answered later with ``finish(page:)``;
/// anything else gets a `400` page at once, and the wait goes on.
final class LoopbackListener: @unchecked Sendable {
    // Sendable: `server` and `loop` are set in init and only used on the loop's thread
    // afterwards (through `loop.perform`); the mutable state is behind `state`.

    /// The query of the callback that was acted on, in order, names and values decoded.
    typealias Parameters = [(name: String, value: String)]

    private struct State {
        var acted = false
        var parameters: Parameters?
        var waiting: CheckedContinuation<Parameters?, Never>?
        var message: MessagePointer?
        var closed = false
        var shutDown = false
        var loopStarted = false
    }

    /// The port the listener is on.
    private(set) var boundPort: UInt16 = 0
    private let expectedState: String
    private let loop = MainLoopThread()
    private var server: OpaquePointer?
    private let state = Mutex(State())

    /// Listens on 127.0.0.1:`port` (`nil`: a port the system picks). A port in use is
    /// ``AuthError/unavailable(_:detail:)-enum.case``; without libsoup too.
    init(port: UInt16?, expectedState: String) throws(AuthError) {
        guard authctl_soup_load() == 0 else {
            throw .unavailable("libsoup-3.0 is not installed, and authctl needs it to sign in in the browser; install the Debian package libsoup-3.0-0")
        }
        self.expectedState = expectedState
        let handler: AuthctlServerHandler = { message, method, path, query, data in
            let listener = Unmanaged<LoopbackListener>.fromOpaque(data!).takeUnretainedValue()
            listener.handle(message!, method: method.map { String(cString: $0) } ?? "", path: path.map { String(cString: $0) } ?? "",
                            query: query.map { String(cString: $0) })
        }
        let unmanaged = Unmanaged.passUnretained(self).toOpaque()
        let created: Result<OpaquePointer, GLibError> = loop.withContext {
            do throws(GLibError) {
                return .success(try withGError { authctl_soup_server_new_loopback(guint(port ?? 0), handler, unmanaged, $0) }!)
            } catch {
                return .failure(error)
            }
        }
        switch created {
        case .success(let server):
            self.server = server
            let bound = authctl_soup_server_port(server)
            guard bound > 0, bound <= 65535 else {
                // Closed here, on this thread, which made it: the loop never ran.
                self.server = nil
                authctl_soup_server_close(server)
                throw .unavailable("the sign-in listener on 127.0.0.1 did not say which port it listens on")
            }
            boundPort = UInt16(bound)
        case .failure(let error):
            throw .unavailable("cannot listen on 127.0.0.1\(port.map { ":\($0)" } ?? "") for the browser's answer: \(error.message)",
                               detail: error.message)
        }
        loop.start()
        state.withLock { $0.loopStarted = true }
    }

    /// The redirect URI that reaches this listener.
    var redirectURI: String { "http://127.0.0.1:\(boundPort)/callback" }

    /// Runs on the loop's thread for every request.
    private func handle(_ message: OpaquePointer, method: String, path: String, query: String?) {
        let parameters = query.flatMap(Self.parse) ?? []
        guard method == "GET", path == "/callback", carriesExpectedState(parameters), take(parameters, message: message) else {
            respond(message, status: 400, page: SignInPage.page(
                title: "Nothing to do here",
                text: "This address is authctl's sign-in listener. It was not expecting this request, and did nothing with it."))
            return
        }
        // Answered by `finish(page:)`, which runs on this thread too, so only after this returns.
        authctl_soup_server_message_pause(message)
    }

    /// Whether `parameters` carry `state` exactly once, and it is the expected one.
    private func carriesExpectedState(_ parameters: Parameters) -> Bool {
        let states = parameters.filter { $0.name == "state" }
        return states.count == 1 && states[0].value.equalsInConstantTime(expectedState)
    }

    /// The one-shot the listener and a pasted address share: the first callback taken is the
    /// answer, and `message` (the listener's request) is answered by ``finish(page:status:)``.
    /// `false` when one was taken before, or the listener is closed.
    private func take(_ parameters: Parameters, message: OpaquePointer?) -> Bool {
        let (taken, waiting) = state.withLock { (state: inout State) -> (Bool, CheckedContinuation<Parameters?, Never>?) in
            guard !state.acted, !state.closed else { return (false, nil) }
            state.acted = true
            state.parameters = parameters
            state.message = message.map(MessagePointer.init)
            defer { state.waiting = nil }
            return (true, state.waiting)
        }
        waiting?.resume(returning: parameters)
        return taken
    }

    /// The longest pasted line taken, in bytes: an authorization response is a few hundred.
    static let maximumPastedLength = 8192

    /// Takes `line`, an address the person pasted from their browser, as the callback when its
    /// query carries the expected `state` once and a `code` or an `error`: the same check as at
    /// the listener, and the same one-shot (whichever of the two comes first is used). Returns
    /// `nil` when taken, else why not. No `state` is ever made up for a bare code.
    func offer(pastedAddress line: String) -> String? {
        // By scalars: "\r\n" is one Character.
        var scalars = Substring(line).unicodeScalars
        while let last = scalars.last, [" ", "\t", "\r", "\n"].contains(last) { scalars.removeLast() }
        while let first = scalars.first, [" ", "\t"].contains(first) { scalars.removeFirst() }
        let text = Substring(scalars)
        if text.isEmpty { return "nothing was pasted; paste the whole address your browser shows once you have signed in" }
        guard text.utf8.count <= Self.maximumPastedLength else {
            return "the pasted line is longer than \(Self.maximumPastedLength) bytes, so it is not the address of this sign-in"
        }
        guard !text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F || (0x80...0x9F).contains($0.value) }) else {
            return "the pasted line contains a control character, so it is not the address of this sign-in"
        }
        guard let question = text.firstIndex(of: "?") else {
            return "the pasted line is not an address with a query (…/callback?code=…&state=…); paste the whole address your browser shows"
        }
        // The listener's own address, with or without its scheme (an address bar may hide it).
        var target = text[..<question].lowercased()
        if target.hasPrefix("http://") { target.removeFirst("http://".count) }
        guard target == "127.0.0.1:\(boundPort)/callback" else {
            return "the pasted address is not this sign-in's (\(redirectURI)?…); paste the address your browser shows once you have signed in"
        }
        var query = text[text.index(after: question)...]
        if let hash = query.firstIndex(of: "#") { query = query[..<hash] }
        guard let parameters = Self.parse(String(query)) else { return "the pasted address has a broken %-encoding" }
        let states = parameters.filter { $0.name == "state" }
        guard !states.isEmpty else {
            return "the pasted address carries no state, so it cannot be told from another sign-in's; paste the whole address your browser shows"
        }
        guard states.count == 1 else { return "the pasted address carries more than one state, so it cannot be told from another sign-in's" }
        guard carriesExpectedState(parameters) else {
            return "the pasted address belongs to another sign-in (its state is not this one's)"
        }
        let codes = parameters.filter { $0.name == "code" }
        guard parameters.contains(where: { $0.name == "error" }) || (codes.count == 1 && !codes[0].value.isEmpty) else {
            return codes.isEmpty ? "the pasted address carries no code; paste the address your browser shows once you have signed in"
                                 : "the pasted address carries no single code; paste the address your browser shows once you have signed in"
        }
        return take(parameters, message: nil) ? nil : "the sign-in has already had its answer"
    }

    /// The callback's parameters, once it comes; `nil` when `timeout` passes first, or the task
    /// is cancelled.
    func callback(timeout: Duration) async -> Parameters? {
        let fired = Once()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Parameters?, Never>) in
                let ready = state.withLock { (state: inout State) -> Parameters? in
                    if let parameters = state.parameters { return parameters }
                    state.waiting = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready); return }
                // Cancelled before the wait was registered: the handler found nothing to end.
                if Task.isCancelled { giveUp(fired); return }
                DispatchQueue.global().asyncAfter(deadline: .now() + timeout.seconds) { [self] in
                    giveUp(fired)
                }
            }
        } onCancel: {
            giveUp(fired)
        }
    }

    private final class Once: Sendable {
        let fired = Atomic<Bool>(false)
    }

    /// Ends the wait with nothing, once — but only a wait that is registered: a cancellation
    /// that comes before the wait is registered must leave `once` unfired, so that the wait's own
    /// look at `Task.isCancelled` can still end it (else it waited for ever).
    private func giveUp(_ once: Once) {
        let waiting = state.withLock { (state: inout State) -> CheckedContinuation<Parameters?, Never>? in
            guard let waiting = state.waiting, !once.fired.exchange(true, ordering: .acquiringAndReleasing) else { return nil }
            state.waiting = nil
            return waiting
        }
        waiting?.resume(returning: nil)
    }

    /// Answers the callback that was acted on with `page` (HTML), waits until it is written
    /// (at most 5 seconds), and closes the listener. Without such a callback it just closes.
    func finish(page: String, status: UInt32 = 200) async {
        let message = state.withLock { (state: inout State) -> MessagePointer? in
            state.closed = true
            defer { state.message = nil }
            return state.message
        }
        if let message {
            final class Written: Sendable {
                let done = Mutex<CheckedContinuation<Void, Never>?>(nil)
                func resume() { done.withLock { $0?.resume(); $0 = nil } }
            }
            let written = Written()
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                written.done.withLock { $0 = continuation }
                loop.perform { [self] in
                    authctl_soup_server_message_on_finished(message.pointer, { data in
                        Unmanaged<Written>.fromOpaque(data!).takeRetainedValue().resume()
                    }, Unmanaged.passRetained(written).toOpaque())
                    respond(message.pointer, status: status, page: page)
                    authctl_soup_server_message_unpause(message.pointer)
                }
                DispatchQueue.global().asyncAfter(deadline: .now() + 5) { written.resume() }
            }
        }
        close()
    }

    /// A request's message (or the server), handed from the loop's thread to a waiting task and
    /// back: only the loop's thread touches what it points to.
    private struct MessagePointer: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    /// Stops listening at once; a callback not yet answered is dropped with its connection.
    func close() {
        let (first, loopStarted) = state.withLock { (state: inout State) -> (Bool, Bool) in
            defer { state.closed = true; state.shutDown = true }
            return (!state.shutDown, state.loopStarted)
        }
        guard first else { return }
        // An init that threw never started the loop: nothing there would run a close, and
        // nothing but this thread has touched the server.
        guard loopStarted else {
            if let server { authctl_soup_server_close(server) }
            self.server = nil
            return
        }
        let server = self.server.map(MessagePointer.init)
        // The server is closed on the loop's thread, which owns it; then the loop stops.
        let closed = DispatchSemaphore(value: 0)
        loop.perform {
            if let server { authctl_soup_server_close(server.pointer) }
            closed.signal()
        }
        closed.wait()
        loop.stop()
    }

    private func respond(_ message: OpaquePointer, status: UInt32, page: String) {
        var bytes = Array(page.utf8)
        bytes.withUnsafeMutableBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) {
                authctl_soup_server_message_respond(message, guint(status), "text/html; charset=utf-8", $0.baseAddress, gsize($0.count))
            }
        }
    }

    /// A query's parameters as a form encodes them (`+` a space, `%XX` a byte), in order;
    /// `nil` when an encoding is broken or a value is not UTF-8. The corresponding C function is
    /// `g_uri_unescape_string`.
    static func parse(_ query: String) -> Parameters? {
        var parameters: Parameters = []
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decoded(_ text: Substring) -> String? {
                let plus = String(text.map { $0 == "+" ? " " : $0 })
                guard let raw = g_uri_unescape_string(plus, nil) else { return nil }
                defer { g_free(raw) }
                return String(validatingCString: raw)
            }
            guard let name = decoded(parts[0]), let value = decoded(parts.count > 1 ? parts[1] : "") else { return nil }
            parameters.append((name, value))
        }
        return parameters
    }

    deinit {
        close()
    }
}
