// SPDX-License-Identifier: Apache-2.0
@testable import AuthControllerCore
import DesktopSandbox
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `status`'s calls made without GIO, against the real dbus-daemon and gnome-keyring: the same
/// answers as through GIO, and a peer that is not a bus is handed over to GIO, or runs into the
/// deadline, never hangs.
@Suite("The bus without GIO")
struct BareBusTests {
    static func statusCalls(service: String, account: String) -> [BareBusConnection.MethodCall] {
        [
            SecretServiceRequest.searchItems([("service", service), ("account", account)]).methodCall,
            SecretServiceRequest.collectionIsLocked("/org/freedesktop/secrets/aliases/default").methodCall,
        ]
    }

    /// The replies to `calls`, asked again while gnome-keyring answers the `Locked` property,
    /// asked beside a search, with `UnknownMethod` for a collection path it made up (about one
    /// time in a hundred; the store then asks one call at a time).
    static func bareReplies(_ calls: [BareBusConnection.MethodCall], address: String) throws(BareBusConnection.Failure) -> [BusMessage] {
        var tries = 1
        while true {
            do {
                return try BareBusConnection.call(calls, address: address, connectTimeout: 5, callTimeout: 5)
            } catch {
                guard case .refused(let why) = error, why.contains("org.freedesktop.DBus.Error.UnknownMethod"), tries < 5 else { throw error }
                tries += 1
            }
        }
    }

    @Test("SearchItems and the collection's Locked property answer as through GIO, unlocked and locked; only a process's first read goes this way")
    func sameAnswersAsGIO() async throws {
        let sandbox = try await DesktopSandbox.started()
        defer { sandbox.stop() }
        let scenario = try await Scenario(sandbox: sandbox)
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        let attributes = [("service", scenario.service), ("account", "alice")]
        let gio = SessionBus.shared(address: sandbox.busAddress)
        // The process's first read goes without GIO; later ones through GIO's connection, kept.
        let first = try SecretServiceCalls.statusReadWithoutGIO(gio, attributes: attributes, what: "read", timeout: 5)
        switch first {
        case .answered(let read):
            #expect(read.found == true)
            #expect(!read.locked)
        case .refused:
            break  // gnome-keyring's answer to a new caller's first calls, now and then: made, and refused
        case .notMade:
            Issue.record("the first read was not made without GIO")
        }
        let second = try SecretServiceCalls.statusReadWithoutGIO(gio, attributes: attributes, what: "read", timeout: 5)
        guard case .notMade = second else { Issue.record("\(second)"); return }
        func throughGIO() throws -> (unlocked: [String], locked: [String]) {
            try gio.call("search", timeout: 5) { connection, deadline throws(GLibError) in
                try SecretServiceCalls.searchItems(connection, attributes: attributes, deadline)
            }
        }

        var replies = try Self.bareReplies(Self.statusCalls(service: scenario.service, account: "alice"), address: sandbox.busAddress)
        var found = try replies[0].objectPathArrays()
        #expect(found.first.count == 1)
        #expect(found.first == (try throughGIO()).unlocked)
        #expect(found.second.isEmpty)
        #expect(try replies[1].booleanInVariant() == false)

        try await scenario.lockKeyring()
        replies = try Self.bareReplies(Self.statusCalls(service: scenario.service, account: "alice"), address: sandbox.busAddress)
        found = try replies[0].objectPathArrays()
        #expect(found.first.isEmpty)
        #expect(found.second.count == 1)
        #expect(found.second == (try throughGIO()).locked)
        #expect(try replies[1].booleanInVariant() == true)

        replies = try Self.bareReplies(Self.statusCalls(service: scenario.service, account: "nobody"), address: sandbox.busAddress)
        found = try replies[0].objectPathArrays()
        #expect(found.first.isEmpty && found.second.isEmpty, "\(found)")
    }

    @Test("an address list whose first entry is not there is GIO's to try: status still answers")
    func addressListFallsBack() async throws {
        var scenario = try await Scenario()
        try await scenario.authctl("sign-in", "alice", "--password-stdin", stdin: "pw").expect(0)
        let address = "unix:path=/nonexistent/bus;" + scenario.sandbox.busAddress
        #expect(throws: BareBusConnection.Failure.notHandled("connect: errno \(ENOENT)")) {
            try BareBusConnection.call(Self.statusCalls(service: scenario.service, account: "alice"), address: address,
                                       connectTimeout: 5, callTimeout: 5)
        }
        scenario.extraEnvironment["DBUS_SESSION_BUS_ADDRESS"] = address
        let run = try await scenario.authctl("status")
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.hasPrefix("Signed in to \(scenario.service) as alice"), "\(run)")
    }

    @Test("a peer that refuses us or sends what no bus sends is handed over at once",
          arguments: ["REJECTED EXTERNAL\r\n", "OK 0123\r\nl\u{2}\u{1}\u{1}\u{0}\u{0}\u{0}\u{7F}\u{1}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{7F}",
                      "OK 0123\r\nX\u{2}\u{1}\u{1}\u{0}\u{0}\u{0}\u{0}\u{1}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}\u{0}", "OK 0123\r\n"])
    func strangePeers(_ answer: String) async throws {
        let sandbox = try await SharedSandbox.get()
        let peer = try ScriptedPeer(in: sandbox.directory, answer: Array(answer.utf8))
        let started = Date()
        let error = #expect(throws: BareBusConnection.Failure.self) {
            try BareBusConnection.call(Self.statusCalls(service: "s", account: "a"), address: peer.address, connectTimeout: 5, callTimeout: 5)
        }
        guard case .notHandled = error else { Issue.record("\(String(describing: error))"); return }
        #expect(Date().timeIntervalSince(started) < 4)
    }

    @Test("once Hello is answered, a bus that closes is a peer that went away, and an error reply is the calls' answer")
    func afterHello() async throws {
        let sandbox = try await SharedSandbox.get()
        let ok = Array("OK 0123\r\n".utf8)
        var peer = try ScriptedPeer(in: sandbox.directory, answer: ok + Self.reply(to: 1))
        #expect(throws: BareBusConnection.Failure.wentAway) {
            try BareBusConnection.call(Self.statusCalls(service: "s", account: "a"), address: peer.address, connectTimeout: 5, callTimeout: 5)
        }
        peer = try ScriptedPeer(in: sandbox.directory, answer: ok + Self.reply(to: 1) + Self.reply(to: 2, error: "org.freedesktop.DBus.Error.NoReply"))
        #expect(throws: BareBusConnection.Failure.wentAway) {
            try BareBusConnection.call(Self.statusCalls(service: "s", account: "a"), address: peer.address, connectTimeout: 5, callTimeout: 5)
        }
        peer = try ScriptedPeer(in: sandbox.directory, answer: ok + Self.reply(to: 1) + Self.reply(to: 2, error: "x.Failed"))
        #expect(throws: BareBusConnection.Failure.refused("error reply x.Failed to call 2")) {
            try BareBusConnection.call(Self.statusCalls(service: "s", account: "a"), address: peer.address, connectTimeout: 5, callTimeout: 5)
        }
        // Before Hello's reply, the same is this bus's to be asked through GIO.
        peer = try ScriptedPeer(in: sandbox.directory, answer: ok + Self.reply(to: 1, error: "x.Failed"))
        let error = #expect(throws: BareBusConnection.Failure.self) {
            try BareBusConnection.call(Self.statusCalls(service: "s", account: "a"), address: peer.address, connectTimeout: 5, callTimeout: 5)
        }
        guard case .notHandled = error else { Issue.record("\(String(describing: error))"); return }
    }

    /// A method return (or, with `error`, an error reply) to the call of serial `serial`, with
    /// no body, as a bus sends it: little-endian, header fields REPLY_SERIAL and ERROR_NAME.
    static func reply(to serial: UInt8, error: String? = nil) -> [UInt8] {
        var fields: [UInt8] = [5, 1, UInt8(ascii: "u"), 0, serial, 0, 0, 0]
        if let error {
            fields += [4, 1, UInt8(ascii: "s"), 0, UInt8(error.utf8.count), 0, 0, 0] + Array(error.utf8) + [0]
        }
        var message: [UInt8] = [UInt8(ascii: "l"), error == nil ? 2 : 3, 1, 1, 0, 0, 0, 0, 9, 0, 0, 0, UInt8(fields.count), 0, 0, 0] + fields
        while message.count % 8 != 0 { message.append(0) }
        return message
    }

    @Test("the session bus from the environment: an address set but empty, or a trailing comma, is GIO's to refuse; $XDG_RUNTIME_DIR/bus is taken as a path, and only when it is this user's")
    func sessionBusFromTheEnvironment() async throws {
        let sandbox = try await SharedSandbox.get()
        #expect(BareBusConnection.sessionBusSocket(addressVariable: "", runtimeDirectory: "/run/user/0") == nil)
        #expect(BareBusConnection.sessionBusSocket(addressVariable: "unix:path=/a,", runtimeDirectory: nil) == nil)
        #expect(BareBusConnection.sessionBusSocket(addressVariable: "unix:path=/a", runtimeDirectory: "/b") == .path(Array("/a".utf8)))
        // A folder whose name holds what an address would read as an escape.
        let runtime = sandbox.directory + "/runtime%2fof-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        #expect(BareBusConnection.sessionBusSocket(addressVariable: nil, runtimeDirectory: runtime) == nil)
        let peer = try ScriptedPeer(at: runtime + "/bus", answer: [])
        #expect(BareBusConnection.sessionBusSocket(addressVariable: nil, runtimeDirectory: runtime) == .path(Array((runtime + "/bus").utf8)))
        #expect(chown(peer.path, 65534, 65534) == 0)
        #expect(BareBusConnection.sessionBusSocket(addressVariable: nil, runtimeDirectory: runtime) == nil, "another user's socket")
    }

    @Test("a peer that says OK and then nothing: the bus's deadline, not the calls'")
    func silentAfterOK() async throws {
        let sandbox = try await SharedSandbox.get()
        let peer = try ScriptedPeer(in: sandbox.directory, answer: Array("OK 0123\r\n".utf8), thenClose: false)
        let started = Date()
        #expect(throws: BareBusConnection.Failure.deadlinePassed(afterHello: false)) {
            try BareBusConnection.call(Self.statusCalls(service: "s", account: "a"), address: peer.address, connectTimeout: 0.5, callTimeout: 30)
        }
        let seconds = Date().timeIntervalSince(started)
        #expect(seconds >= 0.45 && seconds < 4, "\(seconds) s")
    }
}

/// A Unix socket that accepts one connection, sends `answer` once the client has written, and
/// then closes it (or holds it open).
final class ScriptedPeer: @unchecked Sendable {
    // Sendable: set in init and never changed; the thread only reads them.
    let path: String
    private let descriptor: Int32

    convenience init(in directory: String, answer: [UInt8], thenClose: Bool = true) throws {
        try self.init(at: directory + "/scripted-peer-" + UUID().uuidString.prefix(8), answer: answer, thenClose: thenClose)
    }

    init(at path: String, answer: [UInt8], thenClose: Bool = true) throws {
        self.path = path
        descriptor = try listeningUnixSocket(at: path, backlog: 4)
        let listening = descriptor
        Thread.detachNewThread {
            let connection = accept(listening, nil, nil)
            guard connection >= 0 else { return }
            var request = [UInt8](repeating: 0, count: 4096)
            _ = read(connection, &request, request.count)
            _ = answer.withUnsafeBytes { write(connection, $0.baseAddress!, $0.count) }
            guard thenClose else { return }
            // An end the client reads after the answer: a close with unread bytes would be a
            // reset, which may throw the answer away before the client reads it.
            shutdown(connection, Int32(SHUT_WR))
            while read(connection, &request, request.count) > 0 {}
            close(connection)
        }
    }

    var address: String { "unix:path=\(path)" }

    deinit {
        shutdown(descriptor, Int32(SHUT_RDWR))
        close(descriptor)
        unlink(path)
    }
}
