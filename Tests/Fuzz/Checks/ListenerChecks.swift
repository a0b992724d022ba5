// SPDX-License-Identifier: Apache-2.0
@testable import AuthControllerCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The browser flow's sign-in listener on 127.0.0.1, sent the input as a whole HTTP request
/// over TCP: libsoup reads the request line and headers, the listener decides. It acts only on
/// a GET whose query has exactly one `state`, the expected one, and answers everything else.
enum ListenerChecks {
    private static let expectedState = "af0ifjsldkj"
    /// The listener the next request goes to; one that acted has closed, and is replaced.
    private static let current = Mutex<LoopbackListener?>(nil)

    @Sendable static func request(_ input: [UInt8]) throws(PropertyViolation) {
        let listener = listener(in: current, expecting: expectedState, for: "loopback-request")
        let connection = connect(port: listener.boundPort)
        defer { close(connection) }
        sendAllThenShutWrite(input, on: connection)
        var answer = receive(connection, quietFor: 300)
        let parameters = waitFor { await listener.callback(timeout: .zero) }
        if let parameters {
            let states = parameters.filter { $0.name == "state" }
            try require(input.starts(with: Array("GET ".utf8)), "the listener acted on a request that is not a GET")
            try require(states.count == 1 && states[0].value == expectedState, "the listener acted without the expected state, once")
            waitFor { await listener.finish(page: "done") }
            answer += receive(connection, quietFor: 2000)
            // In the request's version: a 1.0 request gets a 1.0 answer.
            try require(answer.starts(with: Array("HTTP/1.".utf8)) && answer.dropFirst(8).starts(with: Array(" 200 ".utf8)),
                        "the callback acted on was answered \(String(decoding: answer.prefix(40), as: UTF8.self).debugDescription), not 200")
            current.withLock { $0 = nil }
        } else if !answer.isEmpty {
            try require(answer.starts(with: Array("HTTP/1.".utf8)), "an answer that is not HTTP")
        } else {
            // Not answered yet, so perhaps not read yet: on a loaded machine libsoup may act on it
            // after this input's turn, and the next input would be blamed for its callback. The
            // next input gets a listener of its own; closing this one drops what is pending.
            current.withLock { $0 = nil }
            listener.close()
        }
    }

    private static func connect(port: UInt16) -> Int32 {
        let connection = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(connection, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        precondition(connected == 0, "loopback-request: cannot connect to 127.0.0.1:\(port): errno \(errno)")
        return connection
    }

    /// What arrives until the peer closes, or nothing has come for `milliseconds`.
    private static func receive(_ connection: Int32, quietFor milliseconds: Int32) -> [UInt8] {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            var ready = pollfd(fd: connection, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, milliseconds) > 0 else { return received }
            let count = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress!, $0.count, 0) }
            guard count > 0 else { return received }
            received += buffer[..<count]
        }
    }
}

/// A line pasted at the terminal as the address the browser ended on, offered to a listener as
/// the sign-in does (§ "Over SSH" in the README): taken only when it is this listener's
/// callback with this sign-in's `state` once and one code (or an error), and a line refused
/// changes nothing. In the input, `@P` stands for the listener's port and `@S` for its state,
/// which the fuzzer cannot know.
enum PastedAddressChecks {
    private static let expectedState = "Qx7-state_0123456789abcdef"
    private static let current = Mutex<LoopbackListener?>(nil)

    @Sendable static func pasted(_ input: [UInt8]) throws(PropertyViolation) {
        let listener = listener(in: current, expecting: expectedState, for: "pasted-address")
        let line = String(decoding: input, as: UTF8.self)
            .replacing("@P", with: String(listener.boundPort)).replacing("@S", with: expectedState)
        let refusal = listener.offer(pastedAddress: line)
        let answer = waitFor { await listener.callback(timeout: .zero) }
        guard refusal == nil else {
            try require(answer == nil, "a refused line was taken as the callback: \(refusal!)")
            try require(!refusal!.contains("\n") && !refusal!.unicodeScalars.contains(where: isControl), "a refusal that is not one clean line")
            try require(!refusal!.contains(expectedState), "a refusal that shows the sign-in's state")
            return
        }
        guard let answer else { throw PropertyViolation(description: "a line taken that the callback never saw") }
        let trimmed = String(line.unicodeScalars.drop { " \t".unicodeScalars.contains($0) }).lowercased()
        let address = "127.0.0.1:\(listener.boundPort)/callback?"
        try require(trimmed.hasPrefix(address) || trimmed.hasPrefix("http://" + address), "a line taken that is not this listener's callback: \(line.debugDescription)")
        let states = answer.filter { $0.name == "state" }
        try require(states.count == 1 && states[0].value == expectedState, "a line taken without the sign-in's state, once")
        let codes = answer.filter { $0.name == "code" }
        try require(answer.contains { $0.name == "error" } || (codes.count == 1 && !codes[0].value.isEmpty), "a line taken without one code or an error")
        try require(listener.offer(pastedAddress: line) != nil, "a second answer taken")
        listener.close()
        current.withLock { $0 = nil }
    }
}

/// The listener in `slot`, made (expecting `state`) when there is none: one that acted has
/// closed, and the next input gets a new one.
private func listener(in slot: borrowing Mutex<LoopbackListener?>, expecting state: String, for target: String) -> LoopbackListener {
    slot.withLock { current in
        if let current { return current }
        guard let made = try? LoopbackListener(port: nil, expectedState: state) else {
            fatalError("\(target): cannot listen on 127.0.0.1 (is libsoup-3.0 installed?)")
        }
        current = made
        return made
    }
}
