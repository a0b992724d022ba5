// SPDX-License-Identifier: Apache-2.0
/// The D-Bus message format (the D-Bus specification, "Message Protocol"), only as much of it as
/// ``BareBusConnection`` needs: method calls whose arguments are strings and string
/// dictionaries, and replies read as arrays of object paths and a boolean in a variant.
///
/// Written by hand because the two libraries that do it cost more to load than the whole call:
/// see ``BareBusConnection``. GVariant, GIO's format, is the same wire format; everything else in
/// authctl uses it.
struct BusMessage {
    enum Kind: UInt8 {
        case methodCall = 1, methodReturn = 2, error = 3, signal = 4
    }

    /// One value of a method call's arguments.
    enum Argument {
        case string(String)
        /// `a{ss}`, in this order.
        case stringDictionary([(String, String)])

        var signature: String {
            switch self {
            case .string: "s"
            case .stringDictionary: "a{ss}"
            }
        }
    }

    var kind: Kind
    var serial: UInt32
    var replySerial: UInt32?
    var errorName: String?
    /// The body's type signature, without the outer parentheses ("" for no body).
    var signature: String
    /// The body as it came, aligned as if it started at offset 0 (the body starts 8-aligned).
    var body: [UInt8]
    /// Whether the body's numbers are big-endian (the sender's choice).
    var bigEndian = false
}

extension BusMessage {
    /// The largest message read, far above any reply a status read gets: a peer sending more
    /// gets no buffer of its choosing.
    static let maximumLength = 1 << 20

    /// A method call, ready to send: little-endian, protocol version 1.
    /// Returns `nil` when an argument cannot be sent as D-Bus text (it contains a NUL).
    static func methodCall(serial: UInt32, destination: String?, path: String, interface: String, member: String,
                           arguments: [Argument]) -> [UInt8]? {
        // Plain loops here and below (README, Performance, the start-up rules): generic helpers
        // such as `joined()` made a fifth of the call's cost.
        var texts = [destination ?? "", path, interface, member]
        var body = WireWriter()
        var signature = ""
        for argument in arguments {
            signature += argument.signature
            switch argument {
            case .string(let text):
                texts.append(text)
                body.string(text)
            case .stringDictionary(let pairs):
                body.array(elementAlignment: 8) { entries in
                    for (key, value) in pairs {
                        texts.append(key)
                        texts.append(value)
                        entries.align(8)
                        entries.string(key)
                        entries.string(value)
                    }
                }
            }
        }
        for text in texts where text.utf8.contains(0) { return nil }
        var message = WireWriter()
        message.bytes += [UInt8(ascii: "l"), Kind.methodCall.rawValue, 0, 1]
        message.uint32(UInt32(body.bytes.count))
        message.uint32(serial)
        message.array(elementAlignment: 8) { fields in
            fields.field(1, "o") { $0.string(path) }
            fields.field(2, "s") { $0.string(interface) }
            fields.field(3, "s") { $0.string(member) }
            if let destination { fields.field(6, "s") { $0.string(destination) } }
            if !signature.isEmpty { fields.field(8, "g") { $0.signature(signature) } }
        }
        message.align(8)
        return message.bytes + body.bytes
    }

    /// The length of the message at the start of `bytes` once its fixed header is there
    /// (16 bytes), else `nil`; throws for a header no peer may send.
    static func length(ofMessageStartingIn bytes: ArraySlice<UInt8>) throws(BusMessageError) -> Int? {
        guard bytes.count >= 16 else { return nil }
        var reader = try WireReader(bytes.prefix(16))
        reader.offset = 4
        let bodyLength = Int(try reader.uint32())
        _ = try reader.uint32()
        let fieldsLength = Int(try reader.uint32())
        guard bodyLength <= maximumLength, fieldsLength <= maximumLength else { throw .tooLong }
        let headerLength = (16 + fieldsLength + 7) & ~7
        guard headerLength + bodyLength <= maximumLength else { throw .tooLong }
        return headerLength + bodyLength
    }

    /// Reads one whole message (as many bytes as ``length(ofMessageStartingIn:)`` says).
    init(reading bytes: ArraySlice<UInt8>) throws(BusMessageError) {
        var reader = try WireReader(bytes)
        reader.offset = 1
        guard let kind = Kind(rawValue: try reader.byte()) else { throw .malformed }
        _ = try reader.byte()  // flags
        guard try reader.byte() == 1 else { throw .malformed }
        let bodyLength = Int(try reader.uint32())
        let serial = try reader.uint32()
        var replySerial: UInt32?, errorName: String?, signature = ""
        let fieldsEnd = try reader.arrayEnd()
        while reader.offset < fieldsEnd {
            try reader.align(8)
            let code = try reader.byte()
            let type = try reader.signature()
            // The fields the specification defines have one type each.
            let defined: [String] = ["o", "s", "s", "s", "u", "s", "s", "g", "u"]
            if (1...9).contains(code), defined[Int(code) - 1] != type { throw .malformed }
            switch code {
            case 4: errorName = try reader.string()
            case 5: replySerial = try reader.uint32()
            case 8: signature = try reader.signature()
            default: try reader.skipBasicValue(of: type)
            }
        }
        guard reader.offset == fieldsEnd else { throw .malformed }
        try reader.align(8)
        guard reader.remaining == bodyLength else { throw .malformed }
        self.init(kind: kind, serial: serial, replySerial: replySerial, errorName: errorName, signature: signature,
                  body: Array(bytes.suffix(bodyLength)), bigEndian: reader.bigEndian)
    }

    /// The body of a reply of signature `aoao`: two arrays of object paths.
    func objectPathArrays() throws(BusMessageError) -> (first: [String], second: [String]) {
        guard signature == "aoao" else { throw .unexpectedType(signature) }
        var reader = try bodyReader()
        let first = try reader.objectPaths()
        let second = try reader.objectPaths()
        guard reader.remaining == 0 else { throw .malformed }
        return (first, second)
    }

    /// The body of a reply of signature `o`: one object path, as `ReadAlias` answers.
    func objectPath() throws(BusMessageError) -> String {
        guard signature == "o" else { throw .unexpectedType(signature) }
        var reader = try bodyReader()
        let path = try reader.string()
        guard reader.remaining == 0 else { throw .malformed }
        return path
    }

    /// The body of a reply of signature `v` holding a boolean, as `Properties.Get` answers.
    func booleanInVariant() throws(BusMessageError) -> Bool {
        guard signature == "v" else { throw .unexpectedType(signature) }
        var reader = try bodyReader()
        let inner = try reader.signature()
        guard inner == "b" else { throw .unexpectedType("v(\(inner))") }
        let value = try reader.uint32()
        guard value <= 1, reader.remaining == 0 else { throw .malformed }
        return value == 1
    }

    private func bodyReader() throws(BusMessageError) -> WireReader {
        var reader = try WireReader(body[...], bigEndian: bigEndian)
        reader.offset = 0
        return reader
    }
}

/// A message that breaks the format, or is not the reply expected.
enum BusMessageError: Error, Equatable {
    case malformed, tooLong
    case unexpectedType(String)
}

/// Appends values at their alignment, little-endian.
private struct WireWriter {
    var bytes: [UInt8] = []

    mutating func align(_ boundary: Int) {
        while bytes.count % boundary != 0 { bytes.append(0) }
    }

    mutating func uint32(_ value: UInt32) {
        align(4)
        withUnsafeBytes(of: value.littleEndian) { bytes += $0 }
    }

    mutating func string(_ text: String) {
        uint32(UInt32(text.utf8.count))
        bytes += text.utf8
        bytes.append(0)
    }

    mutating func signature(_ text: String) {
        bytes.append(UInt8(text.utf8.count))
        bytes += text.utf8
        bytes.append(0)
    }

    /// An array: its length, padding to the elements' alignment (not counted), the elements.
    mutating func array(elementAlignment: Int, _ elements: (inout WireWriter) -> Void) {
        uint32(0)
        let lengthAt = bytes.count - 4
        align(elementAlignment)
        let start = bytes.count
        elements(&self)
        let length = UInt32(bytes.count - start).littleEndian
        withUnsafeBytes(of: length) { bytes.replaceSubrange(lengthAt..<lengthAt + 4, with: $0) }
    }

    /// A header field: the struct `(y v)`.
    mutating func field(_ code: UInt8, _ type: String, _ value: (inout WireWriter) -> Void) {
        align(8)
        bytes.append(code)
        signature(type)
        value(&self)
    }
}

/// Reads values at their alignment from a message (offsets from the message's start), checking
/// every length against what is there.
private struct WireReader {
    let bytes: ArraySlice<UInt8>
    let bigEndian: Bool
    var offset = 0

    /// A reader of a whole message, whose first byte says its byte order.
    init(_ bytes: ArraySlice<UInt8>) throws(BusMessageError) {
        guard let order = bytes.first, order == UInt8(ascii: "l") || order == UInt8(ascii: "B") else { throw .malformed }
        self.bytes = bytes
        bigEndian = order == UInt8(ascii: "B")
    }

    init(_ bytes: ArraySlice<UInt8>, bigEndian: Bool) throws(BusMessageError) {
        self.bytes = bytes
        self.bigEndian = bigEndian
    }

    var remaining: Int { bytes.count - offset }

    mutating func take(_ count: Int) throws(BusMessageError) -> ArraySlice<UInt8> {
        guard count >= 0, count <= remaining else { throw .malformed }
        let start = bytes.startIndex + offset
        offset += count
        return bytes[start..<start + count]
    }

    mutating func align(_ boundary: Int) throws(BusMessageError) {
        let padding = (boundary - offset % boundary) % boundary
        // The specification requires padding to be zero.
        for byte in try take(padding) where byte != 0 { throw .malformed }
    }

    mutating func byte() throws(BusMessageError) -> UInt8 {
        try take(1).first!
    }

    mutating func uint32() throws(BusMessageError) -> UInt32 {
        try align(4)
        let four = try take(4)
        let first = four.startIndex
        let value = UInt32(four[first]) | UInt32(four[first + 1]) << 8 | UInt32(four[first + 2]) << 16 | UInt32(four[first + 3]) << 24
        return bigEndian ? value.byteSwapped : value
    }

    /// A string or object path: its length, its bytes, a NUL.
    mutating func string() throws(BusMessageError) -> String {
        let length = Int(try uint32())
        return try text(length)
    }

    mutating func signature() throws(BusMessageError) -> String {
        let length = Int(try byte())
        return try text(length)
    }

    /// Text of the kinds read here — object paths, signatures, error names — which the
    /// specification limits to printable ASCII. (Checked byte by byte: `String(validating:)`
    /// is generic, and its first use costs `status` more than the check.)
    private mutating func text(_ length: Int) throws(BusMessageError) -> String {
        let ascii = try take(length)
        guard try byte() == 0 else { throw .malformed }
        for byte in ascii where !(0x20...0x7E).contains(byte) { throw .malformed }
        return String(decoding: ascii, as: UTF8.self)
    }

    /// Reads an array's length and returns the offset where its elements end.
    mutating func arrayEnd(elementAlignment: Int = 8) throws(BusMessageError) -> Int {
        let length = Int(try uint32())
        try align(elementAlignment)
        guard length <= remaining else { throw .malformed }
        return offset + length
    }

    mutating func objectPaths() throws(BusMessageError) -> [String] {
        let end = try arrayEnd(elementAlignment: 4)
        var paths: [String] = []
        while offset < end {
            let path = try string()
            guard path.hasPrefix("/") else { throw .malformed }
            paths.append(path)
        }
        guard offset == end else { throw .malformed }
        return paths
    }

    /// Skips a header field of a type this reader does not use (a later version's field).
    mutating func skipBasicValue(of type: String) throws(BusMessageError) {
        switch type {
        case "y": _ = try take(1)
        case "n", "q": try align(2); _ = try take(2)
        case "b", "i", "u", "h": _ = try uint32()
        case "x", "t", "d": try align(8); _ = try take(8)
        case "s", "o":
            // Any UTF-8: skipped, not read.
            let length = Int(try uint32())
            _ = try take(length)
            guard try byte() == 0 else { throw .malformed }
        case "g": _ = try signature()
        default: throw .unexpectedType(type)
        }
    }
}
