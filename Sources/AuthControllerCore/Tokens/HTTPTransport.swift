/// One POST to a token server, as the token clients need it.
public struct HTTPRequest: Sendable {
    public var url: String
    /// Header names and values, sent in order.
    public var headers: [(String, String)]
    public var body: [UInt8]

    public init(url: String, headers: [(String, String)], body: [UInt8]) {
        self.url = url
        self.headers = headers
        self.body = body
    }
}

/// What the server answered.
public struct HTTPResponse: Sendable, Equatable {
    public var status: Int
    /// Header values by lower-cased name.
    public var headers: [String: String]
    public var body: [UInt8]

    public init(status: Int, headers: [String: String] = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// Sends token requests. The contract every implementation keeps: TLS certificates are always
/// verified; redirects are never followed (a 3xx comes back as it is); an answer over
/// ``maximumAnswerSize`` is ``AuthError/protocolError(_:)`` (76) and is not read further; when
/// `timeout` seconds pass the request is abandoned with ``AuthError/temporaryFailure(_:detail:)``
/// (75); a connection refused, reset or closed without an answer is
/// ``AuthError/unavailable(_:detail:)`` (69).
public protocol HTTPTransport: Sendable {
    func post(_ request: HTTPRequest, timeout: Double) async throws(AuthError) -> HTTPResponse
}

/// The largest answer a token server may give.
public let maximumAnswerSize = 64 * 1024
