// SPDX-License-Identifier: Apache-2.0
@testable import AuthControllerCore
import Testing

/// The D-Bus message format that `status` writes and reads without GIO, and the bus addresses
/// it reads: what it sends parses back, and bytes a broken or hostile peer sends are refused,
/// never trusted and never a crash.
@Suite("D-Bus messages and addresses without GIO")
struct BusMessageTests {
    /// `SearchItems({"service": "s", "account": "ä"})` as `status` sends it.
    let searchItems = BusMessage.methodCall(serial: 7, destination: "org.freedesktop.secrets", path: "/org/freedesktop/secrets",
                                            interface: "org.freedesktop.Secret.Service", member: "SearchItems",
                                            arguments: [.stringDictionary([("service", "s"), ("account", "ä")])])!

    /// The body `aoao` of a reply: `["/a"]`, `[]` (little-endian, offsets from the body's start).
    let twoArrays: [UInt8] = [7, 0, 0, 0, 2, 0, 0, 0, 0x2F, 0x61, 0, 0, 0, 0, 0, 0]

    @Test("a method call parses back: its kind, serial, signature and the body's length; its length is known from 16 bytes")
    func methodCallRoundTrip() throws {
        #expect(try BusMessage.length(ofMessageStartingIn: searchItems[...]) == searchItems.count)
        #expect(try BusMessage.length(ofMessageStartingIn: searchItems[..<15]) == nil)
        let message = try BusMessage(reading: searchItems[...])
        #expect(message.kind == .methodCall)
        #expect(message.serial == 7)
        #expect(message.signature == "a{ss}")
        #expect(message.replySerial == nil)
        // a{ss}: length, padding to 8, two entries of two strings each.
        let entries = 4 + 4 + (4 + 7 + 1) + (4 + 1 + 1) + 6 + (4 + 7 + 1) + (4 + 2 + 1)
        #expect(message.body.count == entries)
        #expect(searchItems.count % 8 == message.body.count % 8)
    }

    @Test("an argument with a NUL is not sent")
    func nulRefused() {
        #expect(BusMessage.methodCall(serial: 1, destination: nil, path: "/", interface: "a.b", member: "C",
                                      arguments: [.string("a\u{0}b")]) == nil)
        #expect(BusMessage.methodCall(serial: 1, destination: nil, path: "/", interface: "a.b", member: "C",
                                      arguments: [.stringDictionary([("k", "v\u{0}")])]) == nil)
    }

    @Test("reply bodies: two arrays of object paths, a boolean in a variant")
    func replyBodies() throws {
        let search = BusMessage(kind: .methodReturn, serial: 3, replySerial: 2, signature: "aoao", body: twoArrays)
        let found = try search.objectPathArrays()
        #expect(found.first == ["/a"])
        #expect(found.second == [])
        let locked = BusMessage(kind: .methodReturn, serial: 4, replySerial: 3, signature: "v", body: [1, 0x62, 0, 0, 1, 0, 0, 0])
        #expect(try locked.booleanInVariant())
        // Big-endian peers are read too.
        let bigEndian = BusMessage(kind: .methodReturn, serial: 4, replySerial: 3, signature: "v", body: [1, 0x62, 0, 0, 0, 0, 0, 1],
                                   bigEndian: true)
        #expect(try bigEndian.booleanInVariant())
    }

    @Test("the wrong reply type is refused, not guessed at")
    func wrongTypes() {
        let asString = BusMessage(kind: .methodReturn, serial: 1, replySerial: 1, signature: "v", body: [1, 0x73, 0, 0, 1, 0, 0, 0, 0x61, 0])
        #expect(throws: BusMessageError.unexpectedType("v(s)")) { try asString.booleanInVariant() }
        let two = BusMessage(kind: .methodReturn, serial: 1, replySerial: 1, signature: "v", body: [1, 0x62, 0, 0, 2, 0, 0, 0])
        #expect(throws: BusMessageError.malformed) { try two.booleanInVariant() }
        let search = BusMessage(kind: .methodReturn, serial: 1, replySerial: 1, signature: "as", body: twoArrays)
        #expect(throws: BusMessageError.unexpectedType("as")) { try search.objectPathArrays() }
        var relative = twoArrays
        relative[8] = 0x61  // "aa": an object path starts with /
        #expect(throws: BusMessageError.malformed) {
            try BusMessage(kind: .methodReturn, serial: 1, replySerial: 1, signature: "aoao", body: relative).objectPathArrays()
        }
    }

    @Test("every truncation and every changed byte of a message and of a reply body is read or refused, never a crash")
    func corruptedBytes() throws {
        for end in 0..<searchItems.count {
            let prefix = searchItems[..<end]
            if let length = try? BusMessage.length(ofMessageStartingIn: prefix) { #expect(length > end) }
            #expect(throws: BusMessageError.self) { try BusMessage(reading: prefix) }
        }
        var refused = 0
        for index in searchItems.indices {
            for value: UInt8 in [0, 1, 0x7F, 0x80, 0xFF, UInt8(ascii: "B"), UInt8(ascii: "v")] where value != searchItems[index] {
                var changed = searchItems
                changed[index] = value
                do {
                    if let length = try BusMessage.length(ofMessageStartingIn: changed[...]), length <= changed.count {
                        _ = try BusMessage(reading: changed[..<length])
                    }
                } catch {
                    refused += 1
                }
            }
        }
        #expect(refused > searchItems.count)
        for index in twoArrays.indices {
            for value: UInt8 in [0, 1, 0x7F, 0xFF] where value != twoArrays[index] {
                var changed = twoArrays
                changed[index] = value
                _ = try? BusMessage(kind: .methodReturn, serial: 1, replySerial: 1, signature: "aoao", body: changed).objectPathArrays()
                _ = try? BusMessage(kind: .methodReturn, serial: 1, replySerial: 1, signature: "v", body: changed).booleanInVariant()
            }
        }
    }

    @Test("a length beyond 1 MiB is refused before anything is read")
    func tooLong() {
        var header = Array(searchItems[..<16])
        header[4...7] = [0, 0, 0x20, 0]  // a body of 2 MiB
        #expect(throws: BusMessageError.tooLong) { try BusMessage.length(ofMessageStartingIn: header[...]) }
        header = Array(searchItems[..<16])
        header[12...15] = [0xFF, 0xFF, 0xFF, 0xFF]  // header fields of 4 GiB
        #expect(throws: BusMessageError.tooLong) { try BusMessage.length(ofMessageStartingIn: header[...]) }
    }

    @Test("bus addresses: the first entry's Unix socket, escapes decoded; anything else is left to GIO",
          arguments: [
              ("unix:path=/run/user/1000/bus", BareBusConnection.SocketAddress.path(Array("/run/user/1000/bus".utf8))),
              ("unix:path=/tmp/a%2cb%20c,guid=0123", .path(Array("/tmp/a,b c".utf8))),
              ("unix:abstract=/tmp/dbus-XYZ,guid=1;tcp:host=localhost,port=1", .abstract(Array("/tmp/dbus-XYZ".utf8))),
          ])
    func addresses(_ address: String, _ expected: BareBusConnection.SocketAddress) {
        #expect(BareBusConnection.socketAddress(of: address) == expected)
    }

    @Test("bus addresses it does not speak", arguments: [
        "", "unix:", "tcp:host=127.0.0.1,port=4000", "unix:tmpdir=/tmp", "unix:path=", "unix:path=/a,abstract=/b",
        "unix:path=/a%2", "unix:path=/a%zz", "unix:path=/a%00b", "unix:path=/a,runtime=yes", "unixpath=/a",
        "autolaunch:;unix:path=/run/user/0/bus", "unix:path=/a,",
    ])
    func unsupportedAddresses(_ address: String) {
        #expect(BareBusConnection.socketAddress(of: address) == nil)
    }
}
