// SPDX-License-Identifier: Apache-2.0
import FoundationEssentials

/// Talks to a token server: the password grant, the refresh, the revocation.
/// One implementation per protocol; `AuthControllerTesting` adds an in-memory server.
package protocol TokenClient: Sendable {
    /// Sends the password (password grant, or registration with `register`). A wrong password
    /// is ``AuthError/denied(_:)-enum.case``.
    func signIn(account: AccountID, password: Password, register: Bool) async throws(AuthError) -> TokenGrant

    /// Exchanges the refresh token for new tokens. A refresh token the server no longer accepts
    /// is ``AuthError/denied(_:)-enum.case``: the session is over.
    func refresh(_ tokens: TokenSet) async throws(AuthError) -> TokenGrant

    /// Revokes the refresh token where the server offers it (RFC 7009); does nothing otherwise.
    func revoke(_ tokens: TokenSet) async throws(AuthError)
}

/// The token client for a binding, over `transport`.
package func makeTokenClient(for binding: ServerBinding, transport: any HTTPTransport, timeout: Double,
                            clock: @escaping @Sendable () -> UInt64 = AuthController.systemClock) -> any TokenClient {
    switch binding.tokenProtocol {
    case .oauth2: OAuth2TokenClient(binding: binding, transport: transport, timeout: timeout, clock: clock)
    case .json: JSONAPITokenClient(binding: binding, transport: transport, timeout: timeout, clock: clock)
    case .oidc: OpenIDTokenClient(binding: binding, transport: transport, timeout: timeout, clock: clock)
    }
}

/// What both protocols share: headers, the clock, reading answers, quoting servers safely.
struct TokenExchange: Sendable {
    let binding: ServerBinding
    let transport: any HTTPTransport
    let timeout: Double
    let clock: @Sendable () -> UInt64

    /// `User-Agent` names authctl and its version.
    static let userAgent = "authctl/\(AuthController.version)"

    /// Posts and stamps the answer with its arrival time and the server's `Date`.
    func post(_ url: String, contentType: String?, authorization: String? = nil,
              body: [UInt8]) async throws(AuthError) -> (HTTPResponse, arrivedAt: UInt64, serverDate: UInt64?) {
        try await send("POST", url, contentType: contentType, authorization: authorization, body: body)
    }

    /// Sends a GET, as ``post(_:contentType:authorization:body:)`` sends a POST.
    func get(_ url: String, authorization: String? = nil) async throws(AuthError) -> (HTTPResponse, arrivedAt: UInt64, serverDate: UInt64?) {
        try await send("GET", url, contentType: nil, authorization: authorization, body: [])
    }

    private func send(_ method: String, _ url: String, contentType: String?, authorization: String?,
                      body: [UInt8]) async throws(AuthError) -> (HTTPResponse, arrivedAt: UInt64, serverDate: UInt64?) {
        var headers = [("Accept", "application/json"), ("User-Agent", Self.userAgent)]
        if let contentType { headers.append(("Content-Type", contentType)) }
        if let authorization { headers.append(("Authorization", authorization)) }
        let response = try await transport.send(HTTPRequest(method: method, url: url, headers: headers, body: body), timeout: .seconds(timeout))
        let arrivedAt = clock()
        if (300..<400).contains(response.status) {
            throw .protocolError("the token server \(binding.server) answered with a redirect (HTTP \(response.status)\(location(response))); authctl does not follow redirects: bind the final URL")
        }
        if response.body.count > maximumAnswerSize {
            throw .protocolError("the token server \(binding.server) answered with more than 64 KiB")
        }
        return (response, arrivedAt, response.headers["date"].flatMap(HTTPDate.microseconds(imfFixdate:)))
    }

    private func location(_ response: HTTPResponse) -> String {
        response.headers["location"].map { " to " + Self.quote($0) } ?? ""
    }

    /// The answer decoded as `Answer` (a struct of optional members), `nil` when it is not a
    /// JSON object of those types. JSONDecoder tells `true` from `1`, which JSONSerialization's
    /// `NSNumber` does not.
    static func decode<Answer: Decodable>(_ type: Answer.Type, _ body: [UInt8], using decoder: JSONDecoder = JSONDecoder()) -> Answer? {
        guard body.first(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }) == UInt8(ascii: "{") else { return nil }
        return try? decoder.decode(Answer.self, from: Data(body))
    }

    /// A lifetime or expiry the server gave: not negative, finite; else a protocol error.
    static func nonNegative(_ value: Double?, _ key: String, server: ServerURL) throws(AuthError) -> Double? {
        guard let value else { return nil }
        guard value.isFinite, value >= 0 else {
            throw .protocolError("the token server \(server) answered with a '\(key)' that is not a non-negative number")
        }
        return value
    }

    /// A token as it may be stored, printed on one line and sent in a header: visible ASCII
    /// only (RFC 6750's b64token is narrower still). Anything else is ``AuthError/protocolError(_:)-enum.case``.
    static func token(_ value: String?, _ key: String, server: ServerURL) throws(AuthError) -> String? {
        guard let value, !value.isEmpty else { return nil }
        guard value.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw .protocolError("the token server \(server) answered with a '\(key)' that is not visible ASCII (spaces or control characters in a token)")
        }
        return value
    }

    /// Server text as it may appear in a message (``Swift/String/peerText(limit:)``), at most 200
    /// characters.
    static func quote(_ text: String) -> String {
        text.peerText(limit: 200)
    }

    /// Seconds as whole seconds, clamped to a century: a hostile server cannot overflow a clock.
    static func seconds(_ value: Double) -> UInt64 {
        UInt64(min(value, 100 * 365 * 86_400).rounded(.down))
    }
}

/// Parses the `Date` header (RFC 9110's IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`), which
/// servers must send in that form. By hand because Foundation's date formatters bring in ICU
/// and its data, which would slow the start-up of every command.
enum HTTPDate {
    /// µs since the epoch of the middle of the named second (the header has one-second
    /// resolution, so the middle is at most half a second off); `nil` for anything else.
    static func microseconds(imfFixdate text: String) -> UInt64? {
        let parts = text.split(separator: " ")
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        guard parts.count == 6, parts[0].count == 4, parts[0].hasSuffix(","), parts[5] == "GMT",
              parts[1].count == 2, let day = Int(parts[1]), let monthIndex = months.firstIndex(of: String(parts[2])),
              parts[3].count == 4, let year = Int(parts[3]), parts[4].count == 8 else { return nil }
        func padded(_ number: Int, _ width: Int) -> String {
            String(repeating: "0", count: max(0, width - String(number).count)) + String(number)
        }
        let rfc3339 = "\(padded(year, 4))-\(padded(monthIndex + 1, 2))-\(padded(day, 2))T\(parts[4])Z"
        return Timestamp.microseconds(rfc3339: rfc3339).map { $0 + 500_000 }
    }
}
