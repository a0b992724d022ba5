// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

/// The proxy variables curl and git read, as a process was started with them: held as they are
/// and read only when a request is sent, so that a command which sends none never fails on them
/// and a request costs no extra work before it goes.
///
/// An empty value counts as unset. `http_proxy` has no upper-case form, as in curl: CGI programs
/// set `HTTP_PROXY` from a request's `Proxy:` header.
public struct ProxyVariables: Sendable, Equatable {
    /// `https_proxy`, else `HTTPS_PROXY`: the proxy of `https` URLs.
    public var https: String?
    /// `http_proxy`: the proxy of `http` URLs.
    public var http: String?
    /// `all_proxy`, else `ALL_PROXY`: the proxy of either scheme when its own is unset.
    public var all: String?
    /// `no_proxy`, else `NO_PROXY`: the hosts reached directly.
    public var noProxy: String?

    /// Variables of your own; every one unset by default.
    public init(https: String? = nil, http: String? = nil, all: String? = nil, noProxy: String? = nil) {
        func set(_ value: String?) -> String? { value?.isEmpty == false ? value : nil }
        self.https = set(https)
        self.http = set(http)
        self.all = set(all)
        self.noProxy = set(noProxy)
    }

    /// This process's.
    public static var current: ProxyVariables {
        ProxyVariables(https: ProcessEnvironment.value("https_proxy") ?? ProcessEnvironment.value("HTTPS_PROXY"),
                       http: ProcessEnvironment.value("http_proxy"),
                       all: ProcessEnvironment.value("all_proxy") ?? ProcessEnvironment.value("ALL_PROXY"),
                       noProxy: ProcessEnvironment.value("no_proxy") ?? ProcessEnvironment.value("NO_PROXY"))
    }

    /// Whether none is set: the desktop's own proxy setting then applies.
    public var areUnset: Bool { https == nil && http == nil && all == nil && noProxy == nil }
}

/// How a request reaches its server: directly, through a proxy the variables name, or as the
/// desktop's own proxy setting says (through GIO), which applies only when no variable is set.
package enum ProxyRoute: Sendable, Equatable {
    case direct
    case proxy(HTTPProxy)
    case desktop

    /// The route of a request to `url` (an absolute `http` or `https` URL). Loopback hosts are
    /// always reached directly. A variable that is not a proxy authctl can use is
    /// ``AuthError/usage(_:)-enum.case`` naming it; a URL without a scheme and host is
    /// ``AuthError/invalidInput(_:)-enum.case``.
    package static func of(_ url: String, under variables: ProxyVariables) throws(AuthError) -> ProxyRoute {
        // Never a guess: a URL whose host cannot be told could be one `no_proxy` names or not.
        guard let components = URLComponents(string: url), let host = components.host?.lowercased(), !host.isEmpty,
              let scheme = components.scheme?.lowercased() else {
            throw .invalidInput("cannot tell which proxy reaches \(url.peerText()): it is not an absolute http or https URL")
        }
        if ServerURL.isLoopbackHost(host) || ServerURL.isLoopbackHost("[\(host)]") { return .direct }
        if variables.areUnset { return .desktop }
        if let list = variables.noProxy, Self.noProxy(list, matches: host) { return .direct }
        let named: (variable: String, value: String)? = switch scheme {
        case "https": variables.https.map { ("https_proxy", $0) } ?? variables.all.map { ("all_proxy", $0) }
        case "http": variables.http.map { ("http_proxy", $0) } ?? variables.all.map { ("all_proxy", $0) }
        default: nil
        }
        guard let named else { return .direct }
        return .proxy(try HTTPProxy(parsing: named.value, from: named.variable))
    }

    /// curl's `no_proxy` matching: comma-separated entries, spaces around them and case ignored;
    /// an entry matches the host itself and, for a name, every subdomain (a leading `.` changes
    /// nothing); `*` alone matches every host. IPv6 addresses are compared without brackets.
    static func noProxy(_ list: String, matches host: String) -> Bool {
        func bare(_ name: String) -> String {
            var name = name
            if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
            while name.hasSuffix(".") { name.removeLast() }
            return name
        }
        let host = bare(host.lowercased())
        let entries = list.split(separator: ",").map { entry -> String in
            String(entry.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed()).lowercased()
        }.filter { !$0.isEmpty }
        if entries == ["*"] { return true }
        let address = ipv4(host)
        return entries.contains { entry in
            var entry = bare(entry)
            // An address matches only itself or a block (curl: 192.168.0.0/16), never a suffix:
            // "0.1" is not 10.0.0.1's domain.
            if let address { return Self.ipv4(entry, contains: address) }
            while entry.hasPrefix(".") || entry.hasPrefix("*.") { entry.removeFirst(entry.hasPrefix(".") ? 1 : 2) }
            guard !entry.isEmpty else { return false }
            return host == entry || (!host.contains(":") && host.hasSuffix("." + entry))
        }
    }

    /// A dotted quad as a number; `nil` for anything else.
    static func ipv4(_ text: String) -> UInt32? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var value: UInt32 = 0
        for part in parts {
            guard !part.isEmpty, part.count <= 3, part.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let byte = UInt32(part), byte <= 255 else { return nil }
            value = value << 8 | byte
        }
        return value
    }

    /// Whether `entry`, an address or `ADDRESS/BITS`, holds `address`.
    private static func ipv4(_ entry: String, contains address: UInt32) -> Bool {
        let parts = entry.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let network = ipv4(String(parts[0])) else { return false }
        var bits: UInt32 = 32
        if parts.count == 2 {
            guard !parts[1].isEmpty, parts[1].count <= 2, parts[1].utf8.allSatisfy({ (0x30...0x39).contains($0) }), let number = UInt32(parts[1]),
                  number <= 32 else { return false }
            bits = number
        }
        let mask: UInt32 = bits == 0 ? 0 : ~UInt32(0) << (32 - bits)
        return network & mask == address & mask
    }
}

/// An HTTP proxy from a variable: `[http://][USER[:PASSWORD]@]HOST[:PORT][/]`, the port 1080
/// when not given (as curl has it). Its user and password are for the proxy's Basic
/// authentication and never shown: the proxy is named by ``name``, `HOST:PORT`.
package struct HTTPProxy: Sendable, Equatable, CustomStringConvertible {
    package let host: String
    package let port: Int
    package let user: String?
    package let password: String?
    /// The variable it came from (`https_proxy`, `http_proxy` or `all_proxy`), for messages.
    package let variable: String

    /// `HOST:PORT`, as messages and `server show` name the proxy.
    package var name: String { "\(host):\(port)" }
    package var description: String { name }

    /// The proxy's URI as GIO takes it: without the user and password, which go only in the
    /// `Proxy-Authorization` authctl sends with each `CONNECT` (``basicAuthorization``). Given
    /// them, libsoup answers a 407 by re-sending the CONNECT, aimed at the proxy itself, with the
    /// same user and password, twenty times: a wrong password would lock the account out.
    package var uri: String { "http://\(host):\(port)" }

    /// `Basic …` of the user and password (RFC 7617), for `Proxy-Authorization`; `nil` without a user.
    package var basicAuthorization: String? {
        guard let user else { return nil }
        return "Basic " + Data("\(user):\(password ?? "")".utf8).base64EncodedString()
    }

    /// Reads `value`, the value of `variable`. What authctl cannot use as an HTTP proxy is
    /// ``AuthError/usage(_:)-enum.case``, without the value (it may hold a password).
    package init(parsing value: String, from variable: String) throws(AuthError) {
        func refuse(_ why: String) -> AuthError {
            .usage("\(variable) is not a proxy authctl can use: \(why); give it as http://HOST:PORT")
        }
        guard value.utf8.count <= 2048 else { throw refuse("it is longer than 2048 bytes") }
        guard value.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw refuse("it contains a space, a control character or a non-ASCII character")
        }
        var rest = Substring(value)
        if let schemeEnd = Self.firstIndex(of: "://", in: rest) {
            let scheme = rest[..<schemeEnd].lowercased()
            guard scheme == "http" else {
                // Named only when it is a scheme (RFC 3986 §3.1): "user:pass://…" is a password.
                let isScheme = scheme.first?.isLetter == true && scheme.allSatisfy { $0.isLetter || $0.isNumber || "+-.".contains($0) }
                throw refuse(scheme.isEmpty ? "its scheme is empty"
                             : isScheme ? "its scheme is \(scheme.prefix(16)), and authctl reaches proxies over http:// only (no SOCKS, no TLS to the proxy)"
                             : "it does not start with http:// or a host")
            }
            rest = rest[rest.index(schemeEnd, offsetBy: 3)...]
        }
        // The path, query or fragment of a proxy's URL mean nothing; curl ignores them too.
        if let end = rest.firstIndex(where: { "/?#".contains($0) }) {
            // A '/', '?' or '#' in a password not percent-encoded ends the host early: the user and
            // the password's start would be taken for the host and port, and named in messages.
            guard !rest[end...].contains("@") else {
                throw refuse("its user or password has a '/', '?' or '#' that is not percent-encoded (%2F, %3F, %23)")
            }
            rest = rest[..<end]
        }
        var user: String?
        var password: String?
        if let at = rest.lastIndex(of: "@") {
            let credentials = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let parts = credentials.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            guard let decodedUser = Self.percentDecoded(parts[0]),
                  let decodedPassword = parts.count > 1 ? Self.percentDecoded(parts[1]) : "" else {
                throw refuse("its user or password has a '%' that does not start a percent-encoding")
            }
            guard !decodedUser.isEmpty else { throw refuse("it has a password but no user") }
            guard !(decodedUser + decodedPassword).unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
                throw refuse("its user or password contains a control character")
            }
            user = decodedUser
            password = parts.count > 1 ? decodedPassword : nil
        }
        var host: Substring
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw refuse("its IPv6 address has no closing ']'") }
            host = rest[...close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw refuse("something follows its IPv6 address") }
                portText = after.dropFirst()
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            host = rest
        }
        guard !host.isEmpty else { throw refuse("it has no host") }
        // GIO refuses a proxy URI whose [...] is not an IPv6 address, and then resolves no proxy
        // at all: every request would go direct.
        if host.hasPrefix("["), !Self.isIPv6Literal(host.dropFirst().dropLast()) {
            throw refuse("its host in [...] is not an IPv6 address (a zone is written %25, as in [fe80::1%25eth0])")
        }
        guard host.hasPrefix("[") || host.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == "_" }) else {
            throw refuse("its host is not a name or an address")
        }
        var port = 1080
        if let portText {
            guard !portText.isEmpty, portText.count <= 5, portText.allSatisfy(\.isASCII), let number = Int(portText),
                  (1...65535).contains(number) else {
                throw refuse("its port must be a number from 1 to 65535")
            }
            port = number
        }
        self.host = host.lowercased()
        self.port = port
        self.user = user
        self.password = password
        self.variable = variable
    }

    /// An IPv6 address, as `inet_pton` reads it, with an optional zone (`%25` and letters,
    /// digits, `-`, `.`, `_` or `~`).
    private static func isIPv6Literal(_ text: Substring) -> Bool {
        var address = text
        if let percent = text.firstIndex(of: "%") {
            let zone = text[percent...]
            guard zone.hasPrefix("%25"), zone.count > 3,
                  zone.dropFirst(3).allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-._~".contains($0)) }) else { return false }
            address = text[..<percent]
        }
        return ServerURL.isIPv6Address(address)
    }

    /// Where `needle` first starts in `text`.
    private static func firstIndex(of needle: String, in text: Substring) -> Substring.Index? {
        var index = text.startIndex
        while index < text.endIndex {
            if text[index...].hasPrefix(needle) { return index }
            index = text.index(after: index)
        }
        return nil
    }

    /// `%XX` decoded; `nil` for a `%` that starts no encoding, or bytes that are not UTF-8.
    private static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else { bytes.append(byte); continue }
            guard let high = iterator.next().flatMap({ UInt8(String(UnicodeScalar($0)), radix: 16) }),
                  let low = iterator.next().flatMap({ UInt8(String(UnicodeScalar($0)), radix: 16) }) else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }
}
