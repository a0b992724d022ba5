// SPDX-License-Identifier: Apache-2.0
@testable import AuthControllerCore
import CGLib
import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// The D-Bus reader that `status` uses instead of GIO: bytes from the bus (any peer on it can
/// answer a call) read over `[UInt8]` slices with offsets of the reader's own.
enum BusChecks {
    /// One message, as the connection frames and reads it; and a method call built from the
    /// input's texts, which must read back as it was written.
    @Sendable static func message(_ input: [UInt8]) throws(PropertyViolation) {
        let framed: Int?
        do { framed = try BusMessage.length(ofMessageStartingIn: input[...]) } catch { framed = nil }
        if let framed {
            try require(framed >= 16 && framed <= BusMessage.maximumLength, "a frame of \(framed) bytes")
        }
        let whole = try? BusMessage(reading: input[...])
        if let whole {
            // What the reader accepts is exactly one frame: the connection would read no more and no less.
            try require(framed == input.count, "a message of \(input.count) bytes read whole, framed as \(framed.map(String.init) ?? "none")")
            try readBody(whole)
        }
        // The connection reads from the front of a buffer it keeps trimming: a slice that starts
        // elsewhere than 0 must read as the same message.
        let shifted = ([0x6C, 0, 0] + input)[3...]
        let again = try? BusMessage(reading: shifted)
        try require((again == nil) == (whole == nil) && again?.body == whole?.body && again?.signature == whole?.signature,
                    "a message reads differently from a slice that does not start at 0")

        let parts = texts(input, count: 6)
        let arguments: [BusMessage.Argument] = [.string(parts[4]), .stringDictionary([(parts[5], parts[0])])]
        guard let call = BusMessage.methodCall(serial: 7, destination: parts[0].isEmpty ? nil : parts[0], path: "/" + parts[1],
                                               interface: parts[2], member: parts[3], arguments: arguments) else { return }
        guard call.count <= BusMessage.maximumLength else { return }
        let length: Int?
        do { length = try BusMessage.length(ofMessageStartingIn: call[...]) } catch {
            throw PropertyViolation(description: "a method call authctl wrote cannot be framed: \(error)")
        }
        try require(length == call.count, "a method call of \(call.count) bytes framed as \(length.map(String.init) ?? "too short")")
        let read: BusMessage
        do { read = try BusMessage(reading: call[...]) } catch {
            throw PropertyViolation(description: "a method call authctl wrote does not read back: \(error)")
        }
        try require(read.kind == .methodCall && read.serial == 7 && read.signature == "sa{ss}", "a method call reads back changed")
    }

    /// Every reader of a body; what they return must be what a Secret Service could mean.
    private static func readBody(_ message: BusMessage) throws(PropertyViolation) {
        if let paths = try? message.objectPathArrays() {
            try require((paths.first + paths.second).allSatisfy { $0.hasPrefix("/") }, "an object path without '/'")
        }
        if let path = try? message.objectPath() {
            try require(path.utf8.allSatisfy { (0x20...0x7E).contains($0) }, "an object path that is not printable ASCII")
        }
        _ = try? message.booleanInVariant()
    }

    /// The calls a `status` makes, answered by a bus that sends the input (the authentication
    /// answer first) and then hangs up: the whole conversation over a real socket, framing included.
    @Sendable static func conversation(_ input: [UInt8]) throws(PropertyViolation) {
        let calls = [SecretServiceRequest.readAlias("default"), SecretServiceRequest.searchItems([("service", "io.github.authctl")]),
                     SecretServiceRequest.collectionIsLocked("/org/freedesktop/secrets/collection/login")].map(\.methodCall)
        let peer = FakeBus.shared.answerNextConnection(with: input)
        let result = Result { () throws(BareBusConnection.Failure) in
            try BareBusConnection.call(calls, socket: FakeBus.shared.address, connectTimeout: 10, callTimeout: 10)
        }
        peer.wait()
        switch result {
        case .success(let replies):
            try require(replies.count == calls.count, "\(replies.count) replies to \(calls.count) calls")
            for (index, reply) in replies.enumerated() {
                // Hello is serial 1; the calls follow it.
                try require(reply.kind == .methodReturn && reply.replySerial == UInt32(index + 2),
                            "reply \(index) answers serial \(reply.replySerial.map(String.init) ?? "none")")
                try readBody(reply)
            }
        case .failure(.deadlinePassed):
            // The peer hung up after its last byte: nothing is left to wait for.
            throw PropertyViolation(description: "a conversation with a bus that hung up waited for its deadline")
        case .failure:
            break
        }
    }
}

extension BusChecks {
    /// The argument types a login-event signal is read in, the first byte picking one: the real
    /// one, and others a peer could send under the same name.
    private static let signalTypes: [StaticString] = ["(sssa{sv})", "(ssa{sv})", "(sssa{sv}s)", "(sss)", "(a{sv})"]

    /// A login-event signal, which any peer on the session bus can emit: its arguments as GDBus
    /// hands them over (a GVariant of the input's bytes, which GLib never trusts), decoded, and
    /// read as a login event of the service watched. What is read as an event keeps the event's rules.
    @Sendable static func signal(_ input: [UInt8]) throws(PropertyViolation) {
        guard let selector = input.first else { return }
        let service = ServiceName(rawValue: "io.github.authctl")!
        let data = Array(input.dropFirst())
        let parameters: OpaquePointer = data.withUnsafeBytes { buffer in
            let bytes = g_bytes_new(buffer.baseAddress, gsize(buffer.count))
            defer { g_bytes_unref(bytes) }
            return g_variant_ref_sink(g_variant_new_from_bytes(variantType(signalTypes[Int(selector) % signalTypes.count]), bytes, 0))
        }
        defer { g_variant_unref(parameters) }
        let signal = GVariant.decodeSignal(parameters)
        guard let event = LoginEventListener.event(from: signal, service: service) else { return }
        try require(event.service == service, "an event of another service")
        try require(event.account.map { AccountID(rawValue: $0.rawValue) != nil } ?? true, "an event of an account id that is not valid")
        try require((try? DisplayName.validate(event.name)) != nil, "an event with a display name that is not valid")
        try require(event.reason != .initial, "an initial event read from a signal")
    }
}

/// A Unix socket in the abstract namespace whose every connection gets the bytes it is told to
/// send, and is then shut for writing.
private final class FakeBus: @unchecked Sendable {
    // Sendable: `listener` and `address` are set once in init; each connection is served by one
    // block at a time, which the caller waits for before the next.
    static let shared = FakeBus()

    let address: BareBusConnection.SocketAddress
    private let listener: Int32

    private init() {
        let name = Array("authctl-fuzz-bus-\(getpid())".utf8)
        address = .abstract(name)
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var socketAddress = sockaddr_un()
        socketAddress.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &socketAddress.sun_path) { $0.copyBytes(from: [0] + name) }
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + 1 + name.count)
        let bound = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) }
        }
        precondition(bound == 0 && listen(listener, 16) == 0, "FakeBus: cannot listen: errno \(errno)")
    }

    /// Serves the next connection on another thread; wait for the returned semaphore afterwards.
    func answerNextConnection(with bytes: [UInt8]) -> DispatchSemaphore {
        let done = DispatchSemaphore(value: 0)
        let listener = self.listener
        DispatchQueue.global().async {
            defer { done.signal() }
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }
            defer { close(connection) }
            sendAllThenShutWrite(bytes, on: connection)
            // Until the client is done with the connection: what it sends is read and dropped.
            var sink = [UInt8](repeating: 0, count: 4096)
            while sink.withUnsafeMutableBytes({ recv(connection, $0.baseAddress!, $0.count, 0) }) > 0 {}
        }
        return done
    }
}

/// Sends `bytes` whole on the socket `connection` (less, if the peer stops taking them), then
/// shuts its writing side: the peer reads an end where the input ends.
func sendAllThenShutWrite(_ bytes: [UInt8], on connection: Int32) {
    var sent = 0
    while sent < bytes.count {
        let count = bytes.withUnsafeBytes { send(connection, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
        guard count > 0 else { break }
        sent += count
    }
    shutdown(connection, Int32(SHUT_WR))
}
