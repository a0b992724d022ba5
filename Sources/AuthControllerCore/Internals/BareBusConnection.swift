// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Method calls on the session bus made without GIO: a socket of their own, the EXTERNAL
/// authentication (the kernel tells the bus our uid), `Hello`, the calls sent together, their
/// replies read until the last one is in.
///
/// Written by hand because `status` — what scripts run in loops — would otherwise spend most of
/// its time starting a D-Bus client: GIO's starts a worker thread and registers its GObject types
/// before the first byte is sent, as many instructions as `dbus-send` takes for the whole call,
/// and libdbus (and sd-bus) would have to be loaded beside GIO, which every other command needs.
///
/// It handles only the plain case. A bus address that is not a Unix socket, a socket that refuses
/// us, a bus it cannot understand before `Hello` is answered: all are ``Failure/notHandled(_:)``,
/// and the caller makes the same calls through GIO, which words every error as the other commands
/// do. Once the bus has answered `Hello`, what comes is the calls' answer: an error reply or a
/// reply it cannot read is ``Failure/refused(_:)`` (the caller's calls failed), a peer that goes
/// away is ``Failure/wentAway``, and a deadline that passes is a deadline — asking again would
/// take the same time once more.
enum BareBusConnection {
    /// A method call, addressed.
    struct MethodCall {
        var destination: String
        var path: String
        var interface: String
        var member: String
        var arguments: [BusMessage.Argument]
    }

    enum Failure: Error, Equatable {
        /// This way could not make the calls (the text says why, for tests and debugging).
        case notHandled(String)
        /// The calls were made, and answered with an error or with what is not their reply.
        case refused(String)
        /// The bus or the peer called went away during the calls.
        case wentAway
        /// A deadline passed: the bus's, before it answered `Hello`, else the calls'.
        case deadlinePassed(afterHello: Bool)
    }

    /// The session bus's socket as GIO finds it: the address in `DBUS_SESSION_BUS_ADDRESS` when
    /// the variable is set (even to nothing, which GIO refuses), else `$XDG_RUNTIME_DIR/bus` when
    /// it is a socket of this user's; `nil` otherwise (GIO has more rules, and words the error).
    static func sessionBusSocket() -> SocketAddress? {
        sessionBusSocket(addressVariable: ProcessEnvironment.valueEvenIfEmpty("DBUS_SESSION_BUS_ADDRESS"),
                         runtimeDirectory: ProcessEnvironment.value("XDG_RUNTIME_DIR"))
    }

    /// ``sessionBusSocket()`` from the two variables' values.
    static func sessionBusSocket(addressVariable: String?, runtimeDirectory: String?) -> SocketAddress? {
        if let addressVariable { return socketAddress(of: addressVariable) }
        guard let runtimeDirectory else { return nil }
        let path = runtimeDirectory + "/bus"
        var status = stat()
        // Another user's socket, in an XDG_RUNTIME_DIR inherited across `su`: GIO passes it by.
        guard stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFSOCK, status.st_uid == geteuid() else { return nil }
        return .path(Array(path.utf8))
    }

    /// Where a Unix socket of a bus is.
    enum SocketAddress: Equatable {
        case path([UInt8])
        /// Linux's abstract namespace: the name without its leading NUL.
        case abstract([UInt8])
    }

    /// The socket the address's first entry names, when it is `unix:path=…` or `unix:abstract=…`
    /// (D-Bus specification, "Server Addresses"); `nil` for anything else.
    static func socketAddress(of address: String) -> SocketAddress? {
        // Read byte by byte: `split` and its kind are generic, and instantiating them costs
        // `status` more than the parse.
        var bytes: [UInt8] = []
        for byte in address.utf8 {
            if byte == UInt8(ascii: ";") { break }
            bytes.append(byte)
        }
        let transport: [UInt8] = [0x75, 0x6E, 0x69, 0x78, 0x3A]  // "unix:"
        guard bytes.count > transport.count, Array(bytes[..<transport.count]) == transport else { return nil }
        var found: SocketAddress?
        var pairStart = transport.count
        while pairStart < bytes.count {
            var pairEnd = pairStart
            while pairEnd < bytes.count && bytes[pairEnd] != UInt8(ascii: ",") { pairEnd += 1 }
            var equals = pairStart
            while equals < pairEnd && bytes[equals] != UInt8(ascii: "=") { equals += 1 }
            guard equals < pairEnd, let value = unescaped(bytes[(equals + 1)..<pairEnd]), !value.isEmpty else { return nil }
            let key = String(decoding: bytes[pairStart..<equals], as: UTF8.self)
            if key == "path" || key == "abstract" {
                guard found == nil else { return nil }
                found = key == "path" ? .path(value) : .abstract(value)
            } else if key != "guid" {
                return nil
            }
            pairStart = pairEnd + 1
        }
        // A trailing `,` is an empty pair, which GIO refuses.
        guard bytes.last != UInt8(ascii: ",") else { return nil }
        return found
    }

    /// An address value's bytes: `%` and two hex digits stand for a byte.
    private static func unescaped(_ value: ArraySlice<UInt8>) -> [UInt8]? {
        var bytes: [UInt8] = []
        var index = value.startIndex
        while index < value.endIndex {
            let byte = value[index]
            index += 1
            guard byte == UInt8(ascii: "%") else { bytes.append(byte); continue }
            guard index + 1 < value.endIndex, let high = hexValue(value[index]), let low = hexValue(value[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        for byte in bytes where byte == 0 { return nil }
        return bytes
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Makes `calls` on the bus at `address` (see ``call(_:socket:connectTimeout:callTimeout:)``).
    static func call(_ calls: [MethodCall], address: String, connectTimeout: Double,
                     callTimeout: Double) throws(Failure) -> [BusMessage] {
        guard let socketAddress = socketAddress(of: address) else { throw .notHandled("not a Unix socket address: \(address)") }
        return try call(calls, socket: socketAddress, connectTimeout: connectTimeout, callTimeout: callTimeout)
    }

    /// Makes `calls` on the bus at `socket` and returns their replies in order: connecting and
    /// `Hello` within `connectTimeout` seconds, then the replies within `callTimeout`.
    static func call(_ calls: [MethodCall], socket socketAddress: SocketAddress, connectTimeout: Double,
                     callTimeout: Double) throws(Failure) -> [BusMessage] {
        try converse(socket: socketAddress, connectTimeout: connectTimeout, callTimeout: callTimeout) { exchange throws(Failure) in
            try exchange.ask(calls)
        }
    }

    /// Holds a conversation with the bus at `socket`: `body` asks calls, a batch at a time, each
    /// batch after the answers to the one before (a call that needs what an earlier one answered).
    /// Connecting and `Hello` within `connectTimeout` seconds; every reply after `Hello` within
    /// `callTimeout` of it, one deadline for the whole conversation.
    static func converse<Answer>(socket socketAddress: SocketAddress, connectTimeout: Double, callTimeout: Double,
                                 _ body: (Exchange) throws(Failure) -> Answer) throws(Failure) -> Answer {
        let connectDeadline = Posix.monotonicSeconds() + connectTimeout
        let socket = try Socket(connectingTo: socketAddress)
        defer { socket.close() }
        let exchange = Exchange(socket, connectDeadline: connectDeadline, callTimeout: callTimeout)
        do throws(Failure) {
            return try body(exchange)
        } catch .deadlinePassed {
            throw .deadlinePassed(afterHello: exchange.helloAnswered)
        } catch .refused(let why) where !exchange.helloAnswered {
            throw .notHandled(why)
        } catch .wentAway where !exchange.helloAnswered {
            throw .notHandled("the bus closed the connection")
        }
    }

    /// One connection's calls: the first batch goes out with the authentication and `Hello` in
    /// one write, the way sd-bus starts (the bus reads what follows BEGIN as messages once it has
    /// said OK, and a bus that says something else closes the connection).
    final class Exchange {
        private let socket: Socket
        private let connectDeadline: Double
        private let callTimeout: Double
        private var serial: UInt32 = 0
        private var callDeadline: Double?
        fileprivate var helloAnswered: Bool { callDeadline != nil }

        fileprivate init(_ socket: Socket, connectDeadline: Double, callTimeout: Double) {
            self.socket = socket
            self.connectDeadline = connectDeadline
            self.callTimeout = callTimeout
        }

        /// Sends `calls` together and returns their replies in order.
        func ask(_ calls: [MethodCall]) throws(Failure) -> [BusMessage] {
            var messages: [UInt8] = []
            var batch = calls
            let first = serial == 0
            if first {
                messages = [0] + Array("AUTH EXTERNAL \(BareBusConnection.hexDigits(String(getuid())))\r\nBEGIN\r\n".utf8)
                batch.insert(MethodCall(destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                                        member: "Hello", arguments: []), at: 0)
            }
            let firstCall = serial + (first ? 2 : 1)
            for call in batch {
                serial += 1
                guard let message = BusMessage.methodCall(serial: serial, destination: call.destination, path: call.path,
                                                          interface: call.interface, member: call.member, arguments: call.arguments)
                else { throw .notHandled("an argument holds a NUL") }
                messages += message
            }
            try socket.send(messages, deadline: callDeadline ?? connectDeadline)
            if first {
                let answer = try socket.receiveLine(deadline: connectDeadline)
                guard answer.count > 3, answer[0] == UInt8(ascii: "O"), answer[1] == UInt8(ascii: "K"), answer[2] == UInt8(ascii: " ") else {
                    throw .notHandled("the bus did not accept EXTERNAL authentication")
                }
            }
            // The bus answers a connection's messages in order: Hello first.
            var replies: [BusMessage?] = Array(repeating: nil, count: calls.count)
            var missing = calls.count
            while missing > 0 {
                let message = try socket.receiveMessage(deadline: callDeadline ?? connectDeadline)
                guard message.kind == .methodReturn || message.kind == .error, let replySerial = message.replySerial else { continue }
                if message.kind == .error {
                    let name = message.errorName ?? ""
                    if ErrorMap.disconnectionErrorNames.contains(name) { throw .wentAway }
                    throw .refused("error reply \(name) to call \(replySerial)")
                }
                if replySerial == 1 && !helloAnswered {
                    callDeadline = Posix.monotonicSeconds() + callTimeout
                } else if helloAnswered, replySerial >= firstCall, Int(replySerial - firstCall) < calls.count,
                          replies[Int(replySerial - firstCall)] == nil {
                    replies[Int(replySerial - firstCall)] = message
                    missing -= 1
                } else {
                    throw .refused("a reply to no call (serial \(replySerial))")
                }
            }
            var all: [BusMessage] = []
            for reply in replies { all.append(reply!) }
            return all
        }
    }

    /// `0` → `30`: the EXTERNAL mechanism's initial response is the uid as text, hex-encoded.
    fileprivate static func hexDigits(_ text: String) -> String {
        let digits: [Character] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "a", "b", "c", "d", "e", "f"]
        var hex = ""
        for byte in text.utf8 {
            hex.append(digits[Int(byte >> 4)])
            hex.append(digits[Int(byte & 0xF)])
        }
        return hex
    }
}

extension BareBusConnection {
    /// A non-blocking stream socket whose every wait has a deadline (monotonic seconds).
    fileprivate final class Socket {
        let descriptor: Int32
        private var received: [UInt8] = []
        private var buffer = [UInt8](repeating: 0, count: 4096)

        init(connectingTo address: SocketAddress) throws(Failure) {
            descriptor = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            guard descriptor >= 0 else { throw .notHandled("socket: errno \(errno)") }
            var socketAddress = sockaddr_un()
            socketAddress.sun_family = sa_family_t(AF_UNIX)
            let name: [UInt8]
            switch address {
            case .path(let path): name = path + [0]
            case .abstract(let abstract): name = [0] + abstract
            }
            let capacity = MemoryLayout.size(ofValue: socketAddress.sun_path)
            guard name.count <= capacity else {
                Glibc.close(descriptor)
                throw .notHandled("socket path too long")
            }
            withUnsafeMutableBytes(of: &socketAddress.sun_path) { $0.copyBytes(from: name) }
            let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + name.count)
            let connected = withUnsafePointer(to: &socketAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, length) }
            }
            // A Unix socket connects at once or not at all (EAGAIN: its backlog is full).
            guard connected == 0 else {
                let error = errno
                Glibc.close(descriptor)
                throw .notHandled("connect: errno \(error)")
            }
        }

        func close() { Glibc.close(descriptor) }

        /// Waits until the socket is ready for `events`, or throws when the deadline passes.
        private func wait(for events: Int16, deadline: Double) throws(Failure) {
            while true {
                let left = deadline - Posix.monotonicSeconds()
                guard left > 0 else { throw .deadlinePassed(afterHello: false) }
                var poll = pollfd(fd: descriptor, events: events, revents: 0)
                let result = Glibc.poll(&poll, 1, Int32(min(left * 1000, 60_000).rounded(.up)))
                if result > 0 { return }
                if result < 0 && errno != EINTR { throw .notHandled("poll: errno \(errno)") }
            }
        }

        func send(_ bytes: [UInt8], deadline: Double) throws(Failure) {
            var sent = 0
            while sent < bytes.count {
                let count = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
                if count > 0 { sent += count; continue }
                let error = errno
                guard count < 0, error == EAGAIN || error == EINTR else { throw .notHandled("send: errno \(error)") }
                try wait(for: Int16(POLLOUT), deadline: deadline)
            }
        }

        /// Reads more from the socket into `received`; throws at its end, or once the deadline
        /// has passed even when the bytes are there: a reply read late is late.
        private func receiveMore(deadline: Double) throws(Failure) {
            guard Posix.monotonicSeconds() < deadline else { throw .deadlinePassed(afterHello: false) }
            while true {
                let count = buffer.withUnsafeMutableBytes { Glibc.recv(descriptor, $0.baseAddress!, $0.count, 0) }
                if count > 0 {
                    received += buffer[..<count]
                    return
                }
                let error = errno
                guard count < 0 else { throw .wentAway }
                guard error == EAGAIN || error == EINTR else { throw error == ECONNRESET ? .wentAway : .notHandled("recv: errno \(error)") }
                try wait(for: Int16(POLLIN), deadline: deadline)
            }
        }

        /// One line of the authentication conversation, without its `\r\n`.
        func receiveLine(deadline: Double) throws(Failure) -> [UInt8] {
            while true {
                var end = 0
                while end + 1 < received.count {
                    if received[end] == 13 && received[end + 1] == 10 {
                        defer { received.removeFirst(end + 2) }
                        return Array(received[..<end])
                    }
                    end += 1
                }
                guard received.count < 1024 else { throw .notHandled("an authentication line without end") }
                try receiveMore(deadline: deadline)
            }
        }

        func receiveMessage(deadline: Double) throws(Failure) -> BusMessage {
            while true {
                do throws(BusMessageError) {
                    if let length = try BusMessage.length(ofMessageStartingIn: received[...]), received.count >= length {
                        defer { received.removeFirst(length) }
                        return try BusMessage(reading: received[..<length])
                    }
                } catch {
                    throw .refused("a message it cannot read: \(error)")
                }
                try receiveMore(deadline: deadline)
            }
        }
    }
}
