// SPDX-License-Identifier: Apache-2.0
public import AuthControllerCore
public import Foundation
import Synchronization

/// A token server in memory that speaks both protocols of a token server — `oauth2` at `/token`
/// (and RFC 7009 revocation at `/revoke`) and `json` at `/login`, `/register` and
/// `/refresh_tokens` — with knobs for what a test needs a server to do: lifetimes, rotation or no refresh token at all, a
/// clock ahead or behind, refusal, failures, delays, malformed answers. It keeps a log of every
/// request. It is an ``/AuthControllerCore/HTTPTransport`` itself, for tests in one process; ``respond(to:)`` is
/// the same server for an HTTP listener.
public final class InMemoryTokenServer: HTTPTransport {
    /// What the server does; change it at any time with ``configure(_:)``.
    public struct Configuration: Sendable {
        /// Accounts and their passwords.
        public var accounts: [String: String] = [:]
        /// How long an access token lives, in whole seconds as the answer gives it; `nil`: the
        /// answer gives no expiry.
        public var accessLifetime: Duration? = .seconds(300)
        /// How long a refresh token lives, in whole seconds; `nil`: the answer gives no expiry (it
        /// never expires).
        public var refreshLifetime: Duration? = .seconds(3600)
        /// Whether a refresh issues a new refresh token (and retires the old one).
        public var rotatesRefreshTokens = true
        /// Whether answers carry a refresh token at all; without one (RFC 6749 allows it) the
        /// access token cannot be renewed.
        public var issuesRefreshTokens = true
        /// Whether access tokens are JWTs with an `exp` claim (and answers give no `expires_in`).
        public var jwtAccessTokens = false
        /// The server's clock minus the real one, in whole seconds.
        public var clockOffset: Duration = .zero
        /// How long each answer takes.
        public var delay: Duration = .zero
        /// Answers for the next requests, used up in order before the server answers itself.
        public var scripted: [Scripted] = []
        /// The `Date` header is left out when false.
        public var sendsDate = true

        /// The defaults: no accounts, 5-minute access and 1-hour refresh tokens, rotated on
        /// refresh, the server's clock right, no delay, a `Date` header.
        public init() {}
    }

    /// A canned answer, or a failure of the connection.
    public enum Scripted: Sendable {
        /// An answer with this status, body and headers, whatever the request was.
        case answer(status: Int, body: String, headers: [String: String] = [:])
        /// No answer: the request throws this error, as a transport does when the connection fails.
        case connectionFailure(AuthError)
    }

    /// One request as the server saw it.
    public struct LoggedRequest: Sendable, Equatable {
        /// The endpoint: `login`, `register`, `refresh` or `revoke` (either protocol), else the URL's
        /// last path component.
        public var endpoint: String
        /// The string fields of the body, a form or a JSON object.
        public var fields: [String: String]
        /// The `Authorization` header, if the request had one.
        public var authorization: String?

        /// A request as the log records it, for comparing with ``InMemoryTokenServer/requests``.
        public init(endpoint: String, fields: [String: String], authorization: String? = nil) {
            self.endpoint = endpoint
            self.fields = fields
            self.authorization = authorization
        }
    }

    private struct State {
        var configuration = Configuration()
        var log: [LoggedRequest] = []
        /// Access tokens → expiry (µs, server clock).
        var accessTokens: [String: UInt64] = [:]
        /// Refresh tokens → (account, expiry µs by the server's clock or nil).
        var refreshTokens: [String: (account: String, expiresAt: UInt64?)] = [:]
        var issued = 0
    }

    private let state = Mutex(State())
    private let clock: @Sendable () -> UInt64

    /// - Parameter clock: the real time now (the server adds its ``Configuration/clockOffset``);
    ///   a test that moves its controller's clock by hand passes the same clock here.
    public init(clock: @escaping @Sendable () -> Date = { Date() }) {
        self.clock = { Timestamp.microseconds(clock()) }
    }

    /// Changes the configuration in place; requests that come after see the change.
    public func configure(_ change: (inout Configuration) -> Void) {
        state.withLock { change(&$0.configuration) }
    }

    /// Every request so far, in order.
    public var requests: [LoggedRequest] { state.withLock { $0.log } }

    /// How many refreshes were asked for (either protocol).
    public var refreshCount: Int { requests.filter { $0.endpoint == "refresh" }.count }

    /// Whether `token` is an access token the server issued and that has not expired.
    public func accepts(accessToken token: String) -> Bool {
        let now = serverNow()
        return state.withLock { $0.accessTokens[token].map { $0 > now } ?? false }
    }

    /// Makes every refresh token issued so far unusable (the server ended the sessions).
    public func revokeAllRefreshTokens() { state.withLock { $0.refreshTokens = [:] } }

    /// The transport's side of the server: waits ``Configuration/delay`` (suspending), then answers
    /// as ``respond(to:)``. A delay of `timeout` or more waits `timeout` seconds and throws
    /// ``/AuthControllerCore/AuthError/temporaryFailure(_:detail:)-enum.case``, as a transport whose deadline passed.
    public func send(_ request: HTTPRequest, timeout: Duration) async throws(AuthError) -> HTTPResponse {
        let delay = state.withLock { $0.configuration.delay }
        if delay > .zero {
            guard delay < timeout else {
                try? await Task.sleep(for: timeout)
                throw .temporaryFailure("the token server did not answer within \(timeout)")
            }
            try? await Task.sleep(for: delay)
        }
        return try respond(to: request)
    }

    /// The server's answer to `request` (its path decides the endpoint).
    public func respond(to request: HTTPRequest) throws(AuthError) -> HTTPResponse {
        let path = request.url.split(separator: "/", omittingEmptySubsequences: false).last.map(String.init) ?? ""
        let fields = Self.fields(of: request)
        let authorization = request.headers.first { $0.0.lowercased() == "authorization" }?.1
        let endpoint: String
        switch (path, fields["grant_type"]) {
        case (_, "refresh_token"?), ("refresh_tokens", _): endpoint = "refresh"
        case (_, "password"?), ("login", _): endpoint = "login"
        case ("register", _): endpoint = "register"
        case ("revoke", _): endpoint = "revoke"
        default: endpoint = path
        }
        let scripted = state.withLock { (state) -> Scripted? in
            state.log.append(LoggedRequest(endpoint: endpoint, fields: fields, authorization: authorization))
            return state.configuration.scripted.isEmpty ? nil : state.configuration.scripted.removeFirst()
        }
        if let scripted {
            switch scripted {
            case .answer(let status, let body, let headers): return HTTPResponse(status: status, headers: headers, body: Array(body.utf8))
            case .connectionFailure(let error): throw error
            }
        }
        let json = fields["grant_type"] == nil
        switch endpoint {
        case "login", "register": return signIn(fields, json: json, register: endpoint == "register")
        case "refresh": return refresh(json ? authorization.map { String($0.dropFirst("Bearer ".count)) } : fields["refresh_token"], json: json)
        case "revoke":
            _ = state.withLock { $0.refreshTokens.removeValue(forKey: fields["token"] ?? "") }
            return answer(200, "")
        default: return answer(404, #"{"code":404,"message":"no such endpoint"}"#)
        }
    }

    // MARK: - Endpoints

    private func signIn(_ fields: [String: String], json: Bool, register: Bool) -> HTTPResponse {
        let account = fields[json ? "login" : "username"] ?? ""
        let password = fields["password"] ?? ""
        let known = state.withLock { (state) -> String?? in
            if register {
                if state.configuration.accounts[account] != nil { return .some(nil) }
                state.configuration.accounts[account] = password
                return .some(password)
            }
            return state.configuration.accounts[account]
        }
        if register, case .some(nil) = known { return answer(409, #"{"code":409,"message":"account exists"}"#) }
        guard case .some(let expected?) = known, expected == password else {
            return json ? answer(401, #"{"code":401,"message":"wrong login or password"}"#)
                        : answer(400, #"{"error":"invalid_grant","error_description":"Invalid user credentials"}"#)
        }
        return issue(for: account, json: json, rotating: true, previous: nil)
    }

    private func refresh(_ token: String?, json: Bool) -> HTTPResponse {
        let now = serverNow()
        let account = state.withLock { (state) -> String? in
            guard let token, let entry = state.refreshTokens[token], entry.expiresAt.map({ $0 > now }) ?? true else { return nil }
            return entry.account
        }
        guard let account else {
            return json ? answer(401, #"{"code":401,"message":"refresh token refused"}"#)
                        : answer(400, #"{"error":"invalid_grant","error_description":"Token is not active"}"#)
        }
        return issue(for: account, json: json, rotating: state.withLock { $0.configuration.rotatesRefreshTokens }, previous: token)
    }

    private func issue(for account: String, json: Bool, rotating: Bool, previous: String?) -> HTTPResponse {
        let now = serverNow()
        let (configuration, serial) = state.withLock { (state) -> (Configuration, Int) in
            state.issued += 1
            return (state.configuration, state.issued)
        }
        let accessLifetime = configuration.accessLifetime.map(\.wholeSeconds)
        let refreshLifetime = configuration.refreshLifetime.map(\.wholeSeconds)
        let accessExpiry = accessLifetime.map { now + $0 * 1_000_000 }
        var accessToken = "access-\(serial)-" + UUID().uuidString.prefix(8)
        if configuration.jwtAccessTokens, let accessExpiry {
            let payload = Data(#"{"sub":"\#(account)","exp":\#(accessExpiry / 1_000_000)}"#.utf8).base64EncodedString()
                .replacingOccurrences(of: "=", with: "").replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            accessToken = "eyJhbGciOiJub25lIn0.\(payload).sig-\(serial)"
        }
        let refreshExpiry = refreshLifetime.map { now + $0 * 1_000_000 }
        let refreshToken = configuration.issuesRefreshTokens && (rotating || previous == nil)
            ? "refresh-\(serial)-" + UUID().uuidString.prefix(8) : nil
        state.withLock { state in
            state.accessTokens[accessToken] = accessExpiry ?? .max
            if let refreshToken {
                if let previous { state.refreshTokens.removeValue(forKey: previous) }
                state.refreshTokens[refreshToken] = (account, refreshExpiry)
            }
        }
        var object: [String: Any]
        if json {
            object = ["accessToken": accessToken, "user": ["login": account]]
            if let accessExpiry { object["accessTokenExpire"] = accessExpiry / 1000 }
            if let refreshToken {
                object["refreshToken"] = refreshToken
                if let refreshExpiry { object["refreshTokenExpire"] = refreshExpiry / 1000 }
            }
        } else {
            object = ["access_token": accessToken, "token_type": "Bearer"]
            if let lifetime = accessLifetime, !configuration.jwtAccessTokens { object["expires_in"] = lifetime }
            if let refreshToken {
                object["refresh_token"] = refreshToken
                if let lifetime = refreshLifetime { object["refresh_expires_in"] = lifetime }
            }
        }
        let body = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
        return answer(200, String(decoding: body, as: UTF8.self))
    }

    // MARK: - Helpers

    private func serverNow() -> UInt64 {
        let offset = state.withLock { $0.configuration.clockOffset }.components.seconds
        return clock().subtractingClamped(-offset * 1_000_000)
    }

    private func answer(_ status: Int, _ body: String) -> HTTPResponse {
        var headers = ["content-type": "application/json"]
        if state.withLock({ $0.configuration.sendsDate }) { headers["date"] = Self.httpDate(serverNow()) }
        return HTTPResponse(status: status, headers: headers, body: Array(body.utf8))
    }

    /// The form fields of an `oauth2` request, or the members of a `json` one.
    static func fields(of request: HTTPRequest) -> [String: String] {
        if let object = try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any] {
            return object.compactMapValues { $0 as? String }
        }
        var fields: [String: String] = [:]
        for pair in String(decoding: request.body, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2 else { continue }
            fields[String(parts[0]).removingPercentEncoding ?? ""] = String(parts[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding
        }
        return fields
    }

    /// IMF-fixdate of a time in µs.
    static func httpDate(_ microseconds: UInt64) -> String {
        let text = Timestamp.rfc3339(microseconds: microseconds)  // 2026-11-18T11:06:40Z
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        let parts = text.split(whereSeparator: { "-T:Z".contains($0) }).map(String.init)
        let days = Int(microseconds / 86_400_000_000)
        let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][days % 7]
        return "\(weekday), \(parts[2]) \(months[Int(parts[1])! - 1]) \(parts[0]) \(parts[3]):\(parts[4]):\(parts[5]) GMT"
    }
}

extension UInt64 {
    fileprivate func subtractingClamped(_ offset: Int64) -> UInt64 {
        if offset >= 0 { return self > UInt64(offset) ? self - UInt64(offset) : 0 }
        let (sum, overflow) = addingReportingOverflow(offset.magnitude)
        return overflow ? .max : sum
    }
}
