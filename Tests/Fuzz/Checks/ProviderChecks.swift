// SPDX-License-Identifier: Apache-2.0
@testable import AuthControllerCore

/// What a token server or an OpenID provider answers, and what the browser brings back to the
/// sign-in listener: read through the clients themselves, over a transport that answers with
/// the input.
enum ProviderChecks {
    /// The statuses a first input byte picks from: the ones the clients tell apart, and some they do not.
    private static let statuses = [200, 200, 200, 201, 400, 401, 403, 409, 500, 503, 302, 404]

    private static func answer(status selector: UInt8, _ body: some Sequence<UInt8>) -> HTTPResponse {
        HTTPResponse(status: statuses[Int(selector) % statuses.count], headers: ["date": "Sun, 17 Mar 2030 17:48:20 GMT"], body: Array(body))
    }

    /// A discovery document: the provider read from it names only normalised URLs, and the issuer bound.
    @Sendable static func discovery(_ input: [UInt8]) throws(PropertyViolation) {
        let transport = ScriptedTransport([HTTPResponse(status: 200, body: input)])
        let result = waitFor { () async -> Result<OpenIDProvider, AuthError> in
            let exchange = TokenExchange(binding: Peer.binding(.oidc), transport: transport, timeout: 5, clock: { Peer.now })
            return await outcome { () async throws(AuthError) in
                try await Discovery(exchange: exchange).provider(at: Peer.server, deviceAuthorizationURL: nil)
            }
        }
        switch result {
        case .success(let provider):
            try require(Discovery.sameIssuer(provider.issuer, Peer.server), "a provider whose issuer is another")
            let urls = [provider.tokenEndpoint, provider.jwksURI] + [provider.authorizationEndpoint, provider.deviceAuthorizationEndpoint,
                                                                     provider.userinfoEndpoint, provider.revocationEndpoint].compactMap { $0 }
            for url in urls {
                try require(ServerURL(rawValue: url.rawValue) == url, "an endpoint that is not normalised: \(url.rawValue)")
            }
            try require(provider.authorizationEndpoint != nil || provider.deviceAuthorizationEndpoint != nil, "a provider with no way to sign in")
        case .failure(let error):
            try requireQuoted(error, "discovery")
        }
    }

    /// A token answer, by the first byte: its status and the request it answers (oauth2's password
    /// grant and refresh, the json protocol's login, registration and refresh, an OpenID code
    /// exchange). A grant holds only tokens that can be stored and sent, and expiries in range.
    @Sendable static func tokenAnswer(_ input: [UInt8]) throws(PropertyViolation) {
        guard let selector = input.first else { return }
        // A body with a NUL: what precedes it is the answer's Date header, to vary the server's clock.
        var body = input.dropFirst()
        var date = "Sun, 17 Mar 2030 17:48:20 GMT"
        if let nul = body.firstIndex(of: 0) {
            date = String(decoding: body[..<nul], as: UTF8.self)
            body = body[(nul + 1)...]
        }
        let transport = ScriptedTransport([HTTPResponse(status: statuses[Int(selector) % statuses.count], headers: ["date": date], body: Array(body))])
        let request = Int(selector >> 4) % 6
        let stored = TokenSet(accessToken: "old-access", refreshToken: "old-refresh")
        let result = waitFor { () async -> Result<TokenGrant, AuthError> in
            await outcome { () async throws(AuthError) in
                let account = AccountID(rawValue: "ada@example.com")!
                let password = try Password("correct horse")
                switch request {
                case 0: return try await OAuth2TokenClient(binding: Peer.binding(.oauth2), transport: transport, timeout: 5, clock: { Peer.now })
                    .signIn(account: account, password: password, register: false)
                case 1: return try await OAuth2TokenClient(binding: Peer.binding(.oauth2), transport: transport, timeout: 5, clock: { Peer.now })
                    .refresh(stored)
                case 2, 3: return try await JSONAPITokenClient(binding: Peer.binding(.json), transport: transport, timeout: 5, clock: { Peer.now })
                    .signIn(account: account, password: password, register: request == 3)
                case 4: return try await JSONAPITokenClient(binding: Peer.binding(.json), transport: transport, timeout: 5, clock: { Peer.now })
                    .refresh(stored)
                default: return try await OpenIDClient(binding: Peer.binding(.oidc), provider: Peer.provider, transport: transport, timeout: 5,
                                                       clock: { Peer.now })
                    .exchange(code: "code", redirectURI: "http://127.0.0.1:1/callback", proof: SignInProof())
                }
            }
        }
        switch result {
        case .success(let grant): try checkGrant(grant)
        case .failure(let error): try requireQuoted(error, "a token answer")
        }
    }

    private static func checkGrant(_ grant: TokenGrant) throws(PropertyViolation) {
        let tokens = grant.tokens
        try require(isVisibleASCII(tokens.accessToken), "an access token that is not visible ASCII")
        for token in [tokens.refreshToken, tokens.idToken].compactMap({ $0 }) {
            try require(isVisibleASCII(token), "a token that is not visible ASCII")
        }
        try require(tokens.tokenType == "Bearer", "a token of type \(tokens.tokenType)")
        for expiry in [grant.accessExpiry, grant.refreshExpiry].compactMap({ $0 }) {
            switch expiry {
            case .after(let seconds): try require(seconds <= 100 * 365 * 86_400, "a lifetime of \(seconds) s")
            case .at(let microseconds): try require(microseconds <= 1_000_000_000_000_000_000, "an expiry at \(microseconds) µs")
            }
        }
        // Whatever times a server grants, the session they make is one the settings file can keep:
        // written, it reads back, with its times (in whole seconds, as the file keeps them).
        let times = grant.times()
        var record = SessionRecord()
        record.user = AccountID(rawValue: "ada@example.com")
        record.name = ""
        record.binding = Peer.binding(.oauth2)
        record.tokenTimes = times
        let keyFile = KeyFile()
        let service = ServiceName(rawValue: "io.github.authctl")!
        KeyFileSettingsStore.encode(record, into: keyFile, service: service)
        switch KeyFileSettingsStore.decode(keyFile.data(), service: service) {
        case .success(let (_, reread)):
            var expected = times
            expected.accessExpiresAt = times.accessExpiresAt.map { $0 / 1_000_000 * 1_000_000 }
            expected.refreshExpiresAt = times.refreshExpiresAt.map { $0 / 1_000_000 * 1_000_000 }
            try require(reread.tokenTimes == expected, "a granted session's times read back as others: \(times) → \(String(describing: reread.tokenTimes))")
        case .failure(let corrupt):
            throw PropertyViolation(description: "a granted session makes a settings file that reads as corrupt: \(corrupt.reason)")
        }
    }

    /// The device flow: the device authorization answer, then one poll's answer (the input's two
    /// parts, split at the first NUL after the status byte). What is shown to the person is fit
    /// to show; the polling interval stays within a second and a day.
    @Sendable static func deviceFlow(_ input: [UInt8]) throws(PropertyViolation) {
        guard let selector = input.first else { return }
        let bodies = input.dropFirst().split(separator: 0, maxSplits: 1, omittingEmptySubsequences: false)
        let transport = ScriptedTransport([answer(status: selector & 0x0F, bodies[0]),
                                           answer(status: selector >> 4, bodies.count > 1 ? bodies[1] : [])])
        let result = waitFor { () async -> Result<(OpenIDClient.DeviceAuthorization, OpenIDClient.Poll?), AuthError> in
            await outcome { () async throws(AuthError) in
                let client = OpenIDClient(binding: Peer.binding(.oidc), provider: Peer.provider, transport: transport, timeout: 5,
                                          clock: { Peer.now })
                let authorization = try await client.authorizeDevice(at: Peer.provider.deviceAuthorizationEndpoint!)
                return (authorization, try? await client.poll(authorization, within: 5))
            }
        }
        switch result {
        case .success(let (authorization, poll)):
            try require(!authorization.deviceCode.isEmpty && authorization.deviceCode.utf8.count <= 4096, "a device code of the wrong size")
            let code = authorization.code
            try require(!code.userCode.isEmpty && code.userCode.utf8.count <= 1024, "a user code of the wrong size")
            try require(!code.userCode.unicodeScalars.contains(where: isControl), "a user code with a control character")
            for url in [code.verificationURI, code.verificationURIComplete].compactMap({ $0 }) {
                try require(OpenIDClient.webURL(url) == url, "a verification URL that is not fit to show: \(url.debugDescription)")
            }
            try require((1...86_400).contains(authorization.interval), "a polling interval of \(authorization.interval) s")
            if case .tokens(let grant)? = poll { try checkGrant(grant) }
        case .failure(let error):
            try requireQuoted(error, "the device flow")
        }
    }

    /// The query of a request to the sign-in listener: what it decodes re-encodes, as a form
    /// would, to a query that decodes to the same parameters.
    @Sendable static func loopbackQuery(_ input: [UInt8]) throws(PropertyViolation) {
        let query = String(decoding: input, as: UTF8.self)
        guard let parameters = LoopbackListener.parse(query) else { return }
        var form = FormBody()
        for (name, value) in parameters { form.add(name, value) }
        let again = LoopbackListener.parse(String(decoding: form.bytes, as: UTF8.self))
        try require(again.map { $0.map { $0.name } == parameters.map { $0.name } && $0.map { $0.value } == parameters.map { $0.value } } ?? false,
                    "parameters that do not survive being sent again")
    }
}
