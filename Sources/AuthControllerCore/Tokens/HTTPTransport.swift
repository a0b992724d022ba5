// SPDX-License-Identifier: Apache-2.0
/// One request to a token server or an OpenID provider: a POST of a form or JSON, or a GET
/// (discovery, keys, userinfo).
public struct HTTPRequest: Sendable {
    /// `POST` or `GET`.
    public var method: String
    /// The absolute URL of the endpoint.
    public var url: String
    /// Header names and values, sent in order.
    public var headers: [(String, String)]
    /// The request body: a form (`application/x-www-form-urlencoded`) or JSON, as the headers
    /// say; empty for a GET.
    public var body: [UInt8]

    /// A request (by default a POST of `body`) to `url` with `headers`.
    public init(method: String = "POST", url: String, headers: [(String, String)], body: [UInt8] = []) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }
}

/// What the server answered.
public struct HTTPResponse: Sendable, Equatable {
    /// The HTTP status code.
    public var status: Int
    /// Header values by lower-cased name.
    public var headers: [String: String]
    /// The answer's body, at most 64 KiB.
    public var body: [UInt8]

    /// An answer with `status`, `headers` (by lower-cased name) and `body`.
    public init(status: Int, headers: [String: String] = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// Sends requests to token servers and OpenID providers. The contract every implementation keeps: TLS certificates are always
/// verified; redirects are never followed (a 3xx comes back as it is); an answer over
/// 64 KiB is ``AuthError/protocolError(_:)-enum.case`` and is not read further; when
/// `timeout` passes the request is abandoned with
/// ``AuthError/temporaryFailure(_:detail:)-enum.case``; a connection refused, reset or closed
/// without an answer is ``AuthError/unavailable(_:detail:)-enum.case``.
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns the server's answer, whatever its status, giving up after
    /// `timeout`.
    func send(_ request: HTTPRequest, timeout: Duration) async throws(AuthError) -> HTTPResponse
}

/// The largest answer a token server or an OpenID provider may give; a larger one is ``AuthError/protocolError(_:)-enum.case``.
package let maximumAnswerSize = 64 * 1024
