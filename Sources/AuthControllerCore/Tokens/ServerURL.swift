// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials
import Synchronization
#if canImport(Glibc)
internal import Glibc
#endif

/// The URL of a token server (or of its revocation endpoint), checked and normalised:
/// absolute; `https`, or `http` only to a loopback host; a host; no user information;
/// no fragment; at most 2048 bytes. Scheme and host are lower-cased, a default port dropped and
/// an empty path made `/`, so two spellings of one server are one binding and one keyring item.
///
/// The check is strict where parsers are lenient: a URL that would silently become something
/// else (an empty string, a space turned into `%20`) is refused, never stored.
public struct ServerURL: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The normalised URL.
    public let rawValue: String
    /// Whether the host is `localhost`, in 127.0.0.0/8, or `[::1]`.
    public let isLoopback: Bool

    /// The longest URL accepted, in bytes.
    public static let maximumLength = 2048

    /// Accepts an already normalised URL (as read back from the settings), `nil` otherwise.
    public init?(rawValue: String) {
        guard let url = try? ServerURL(validating: rawValue), url.rawValue == rawValue else { return nil }
        self = url
    }

    /// The texts this process has accepted, each with its normalised URL: the settings are read
    /// whole at every change, and `serve` with hundreds of services would otherwise parse the
    /// same URLs again each time. What a text normalises to depends on the text alone.
    private static let accepted = Mutex<[String: (rawValue: String, isLoopback: Bool)]>([:])
    private static let acceptedLimit = 4096

    /// Checks and normalises `text`; `role` names it in the message ("server URL", "revoke URL").
    public init(validating text: String, role: String = "server URL") throws(AuthError) {
        if let known = Self.accepted.withLock({ $0[text] }) {
            self.init(normalised: known.rawValue, isLoopback: known.isLoopback)
            return
        }
        try self.init(checking: text, role: role)
        let url = self
        Self.accepted.withLock { accepted in
            if accepted.count >= Self.acceptedLimit { accepted.removeAll(keepingCapacity: true) }
            accepted[text] = (url.rawValue, url.isLoopback)
        }
    }

    private init(normalised: String, isLoopback: Bool) {
        rawValue = normalised
        self.isLoopback = isLoopback
    }

    private init(checking text: String, role: String) throws(AuthError) {
        func refuse(_ rule: String) -> AuthError { .invalidInput("invalid \(role) '\(text.peerText(limit: 200))': \(rule)") }
        let bytes = text.utf8
        guard !bytes.isEmpty else { throw .invalidInput("invalid \(role): it is empty") }
        guard bytes.count <= Self.maximumLength else {
            throw .invalidInput("invalid \(role): it is \(bytes.count) bytes long; the limit is \(Self.maximumLength)")
        }
        guard bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw refuse("it contains a space, a control character or a non-ASCII character; percent-encode them")
        }
        // A `%` must start a percent-encoding; a parser would otherwise re-encode it as `%25`,
        // and the server asked would not be the one typed.
        // Bytes, not Characters, throughout: the settings' URLs are checked at every read, and
        // `serve` reads hundreds of them at each change.
        let characters = Array(bytes)
        func isHex(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte) }
        for (index, byte) in characters.enumerated() where byte == UInt8(ascii: "%") {
            guard index + 2 < characters.count, isHex(characters[index + 1]), isHex(characters[index + 2]) else {
                throw refuse("it has a '%' that does not start a percent-encoding (%XX)")
            }
        }
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
              text.contains("://") else {
            throw refuse("it is not an absolute URL (scheme://host/path)")
        }
        guard scheme == "https" || scheme == "http" else { throw refuse("its scheme must be https (or http for a loopback host)") }
        guard components.percentEncodedUser == nil && components.percentEncodedPassword == nil else {
            throw refuse("it must not contain user information (user:password@)")
        }
        guard components.percentEncodedFragment == nil else { throw refuse("it must not have a fragment (#…)") }
        // `encodedHost` keeps an IDNA host (xn--…) as typed; `percentEncodedHost` would decode it.
        guard let rawHost = components.encodedHost, !rawHost.isEmpty else { throw refuse("it has no host") }
        guard !rawHost.contains("%") else { throw refuse("its host must not be percent-encoded or carry an IPv6 zone") }
        let host = rawHost.lowercased()
        // The URL parser takes any [...] and any sub-delimiter in a name; the name resolver, the
        // proxy rules and the keyring's attributes must not meet a host that is neither.
        if host.hasPrefix("[") {
            guard host.hasSuffix("]"), Self.isIPv6Address(host.dropFirst().dropLast()) else {
                throw refuse("its host in [...] is not an IPv6 address")
            }
        } else {
            guard host.utf8.allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D || $0 == 0x2E || $0 == 0x5F }) else {
                throw refuse("its host is not a name (letters, digits, '-', '.' and '_') or an address")
            }
        }
        let isLoopback = Self.isLoopbackHost(host)
        guard scheme == "https" || isLoopback else {
            throw refuse("plain http is allowed only to a loopback host (localhost, 127.0.0.0/8, [::1]); use https")
        }
        var port = ""
        if let number = components.port {
            guard (1...65535).contains(number) else { throw refuse("its port must be 1 to 65535") }
            if number != (scheme == "https" ? 443 : 80) { port = ":\(number)" }
        }
        let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        guard path.hasPrefix("/") else { throw refuse("it is not an absolute URL (scheme://host/path)") }
        let query = components.percentEncodedQuery.map { "?" + $0 } ?? ""
        let normalised = "\(scheme)://\(host)\(port)\(path)\(query)"
        guard normalised.utf8.count <= Self.maximumLength else {
            throw .invalidInput("invalid \(role): it is \(normalised.utf8.count) bytes long once normalised; the limit is \(Self.maximumLength)")
        }
        rawValue = normalised
        self.isLoopback = isLoopback
    }

    /// The normalised URL, as stored in the settings and shown in messages.
    public var description: String { rawValue }

    /// `localhost`, `[::1]`, or a canonical dotted quad in 127.0.0.0/8. Canonical: the C
    /// library's address parser refuses `127.0.0.09`, so such a "number" would go to the name
    /// resolver — and plain http must never leave the machine.
    static func isLoopbackHost(_ host: String) -> Bool {
        if host == "localhost" || host == "[::1]" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "127" else { return false }
        return parts.allSatisfy { part in
            !part.isEmpty && part.count <= 3 && part.utf8.allSatisfy({ (0x30...0x39).contains($0) })
                && (part == "0" || !part.hasPrefix("0")) && Int(part)! <= 255
        }
    }

    /// An IPv6 address, as the C library reads one (no zone).
    static func isIPv6Address(_ text: Substring) -> Bool {
        var bytes = [UInt8](repeating: 0, count: 16)
        return text.contains(":") && inet_pton(AF_INET6, String(text), &bytes) == 1
    }

    /// The URL of `endpoint` resolved against this one as a directory (a missing trailing `/`
    /// is added first): `https://h/api` + `login` is `https://h/api/login`. The query, if any,
    /// is dropped.
    public func appending(endpoint: String) -> String {
        var base = rawValue
        if let query = base.firstIndex(of: "?") { base = String(base[..<query]) }
        if !base.hasSuffix("/") { base += "/" }
        return base + endpoint
    }
}
