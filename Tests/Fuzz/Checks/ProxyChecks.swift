// SPDX-License-Identifier: Apache-2.0
@testable import AuthControllerCore
import FoundationEssentials

/// The proxy variables (`https_proxy`, `http_proxy`, `all_proxy`, `no_proxy`) and the route they
/// give a request. The first byte picks which of them are set and whether a marker goes into
/// each proxy's password; the rest is, split at NUL bytes, their values and the request's host.
enum ProxyChecks {
    /// Put into a password, never into a scheme, a host or a message's own words: wherever it
    /// shows, a password showed.
    private static let marker = ":Q7~"

    @Sendable static func variables(_ input: [UInt8]) throws(PropertyViolation) {
        guard let selector = input.first else { return }
        let parts = texts(Array(input.dropFirst()), count: 5)
        func value(_ index: Int) -> String? {
            guard selector & (1 << index) != 0 else { return nil }
            var text = parts[index]
            if index < 3, selector & 0x80 != 0, let at = text.lastIndex(of: "@") { text.insert(contentsOf: marker, at: at) }
            return text
        }
        let variables = ProxyVariables(https: value(0), http: value(1), all: value(2), noProxy: value(3))
        for (name, text) in [("https_proxy", variables.https), ("http_proxy", variables.http), ("all_proxy", variables.all)] {
            guard let text else { continue }
            try proxy(text, from: name)
        }
        try route(to: parts[4], under: variables)
    }

    /// What a proxy's value gives: a proxy whose name and URI hold no user or password and
    /// which reads back as itself, or a refusal that names the variable and not the value.
    private static func proxy(_ text: String, from variable: String) throws(PropertyViolation) {
        let parsed: HTTPProxy
        do {
            parsed = try HTTPProxy(parsing: text, from: variable)
        } catch {
            let message = error.message
            try require(message.hasPrefix("\(variable) is not a proxy authctl can use: "), "a refusal that does not name \(variable): \(message)")
            try require(!message.contains(marker.dropFirst()), "a refusal that shows the password: \(message)")
            try requireQuoted(error, "a refused proxy")
            return
        }
        try require((1...65535).contains(parsed.port), "a proxy on port \(parsed.port)")
        try require(!parsed.host.isEmpty && parsed.host == parsed.host.lowercased() && !parsed.host.contains("@") && !parsed.host.contains("/"),
                    "a proxy host that is not a bare lower-case host: \(parsed.host.debugDescription)")
        try require(parsed.uri == "http://" + parsed.name && parsed.description == parsed.name, "a proxy URI that is not http://HOST:PORT: \(parsed.uri)")
        try require(!parsed.uri.contains(marker.dropFirst()), "a proxy URI that carries the password: \(parsed.uri)")
        try require(parsed.password == nil || parsed.user != nil, "a proxy with a password and no user")
        try require((parsed.user == nil) == (parsed.basicAuthorization == nil), "Proxy-Authorization without a user, or a user without it")
        // Its URI, and its URI with the user and password encoded again, read back as itself.
        guard let again = try? HTTPProxy(parsing: parsed.uri, from: variable) else {
            throw PropertyViolation(description: "a proxy URI that does not read back: \(parsed.uri)")
        }
        try require(again.name == parsed.name && again.user == nil, "a proxy URI that reads back as \(again.name)")
        if let user = parsed.user {
            let credentials = encoded(user) + (parsed.password.map { ":" + encoded($0) } ?? "")
            let withCredentials = try? HTTPProxy(parsing: "http://\(credentials)@\(parsed.name)", from: variable)
            try require(withCredentials == parsed, "a proxy whose user and password, encoded again, read back otherwise")
        }
    }

    /// A request's route: loopback always direct, the desktop's setting only when no variable
    /// is set, a host `no_proxy` names direct, and otherwise the scheme's own proxy or `all_proxy`.
    private static func route(to host: String, under variables: ProxyVariables) throws(PropertyViolation) {
        let url = "https://\(host)/token"
        guard let parsed = URLComponents(string: url), let parsedHost = parsed.host?.lowercased(), !parsedHost.isEmpty else {
            try require((try? ProxyRoute.of(url, under: variables)) == nil, "a route guessed for a URL without a host: \(url.debugDescription)")
            return
        }
        // Requests go only to URLs that validate (a server, or a provider's endpoint); on the
        // others the route must only not crash.
        guard (try? ServerURL(validating: url)) != nil else {
            _ = try? ProxyRoute.of(url, under: variables)
            return
        }
        let route: ProxyRoute
        do {
            route = try ProxyRoute.of(url, under: variables)
        } catch {
            // Only a proxy variable that cannot be used refuses, and only when it would be used.
            let chosen = variables.https ?? variables.all
            try require(chosen != nil && (try? HTTPProxy(parsing: chosen!, from: "https_proxy")) == nil,
                        "a route refused with no unusable proxy to take: \(error.message)")
            return
        }
        if ServerURL.isLoopbackHost(parsedHost) || ServerURL.isLoopbackHost("[\(parsedHost)]") {
            try require(route == .direct, "loopback \(parsedHost) routed \(route)")
            return
        }
        if variables.areUnset {
            try require(route == .desktop, "no variable set, and a route other than the desktop's: \(route)")
            return
        }
        let named = variables.noProxy.map { ProxyRoute.noProxy($0, matches: parsedHost) } ?? false
        switch route {
        case .desktop:
            throw PropertyViolation(description: "the desktop's setting taken although a variable is set")
        case .direct:
            try require(named || (variables.https == nil && variables.all == nil), "a direct route where a proxy is set and no_proxy does not name \(parsedHost)")
        case .proxy(let proxy):
            try require(!named, "a proxy for \(parsedHost), which no_proxy names")
            let expected = try? HTTPProxy(parsing: (variables.https ?? variables.all)!, from: variables.https != nil ? "https_proxy" : "all_proxy")
            try require(expected == proxy, "a route through \(proxy.name), which is not the https proxy set")
        }
        if let list = variables.noProxy {
            try require(ProxyRoute.noProxy(list.uppercased(), matches: parsedHost) == named, "no_proxy read differently in upper case")
        }
        if parsedHost.contains(where: { $0.isLetter || $0.isNumber }), !parsedHost.contains(",") {
            try require(ProxyRoute.noProxy(parsedHost, matches: parsedHost), "no_proxy=\(parsedHost) does not name \(parsedHost)")
            try require(ProxyRoute.noProxy("*", matches: parsedHost), "no_proxy=* does not name \(parsedHost)")
        }
    }

    /// Percent-encoded but for unreserved characters.
    private static func encoded(_ text: String) -> String {
        text.utf8.map { byte in
            let scalar = UnicodeScalar(byte)
            return byte < 0x80 && (scalar.properties.isASCIIHexDigit || ("a"..."z").contains(Character(scalar))
                                   || ("A"..."Z").contains(Character(scalar)) || "-._~".unicodeScalars.contains(scalar))
                ? String(scalar) : "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
        }.joined()
    }
}

private extension String {
    func leftPadded(to length: Int) -> String { String(repeating: "0", count: max(0, length - count)) + self }
}
