// SPDX-License-Identifier: Apache-2.0
/// Signing in at an OpenID Connect provider (a service bound with protocol `oidc`): in the
/// person's browser, with PKCE and a one-shot listener on 127.0.0.1, or with a code entered on
/// another device. authctl never sees a password for such a service. The ID token is verified
/// before anything is stored; what comes after — tokens in the keyring, refreshes, the end of a
/// session — is as for any bound service.
///
/// However a sign-in ends before its tokens are stored (the deadline, a refusal, a bad ID
/// token, a cancelled task), nothing is stored, no event is emitted and the listener is closed;
/// tokens the provider issued meanwhile have their refresh token revoked, best effort.
extension AuthController {
    /// How the person signs in at an OpenID provider.
    public enum SignInFlow: String, Sendable, CaseIterable {
        /// In a browser on this machine (authorization code with PKCE, loopback redirect).
        case browser
        /// On any device, by entering a code (RFC 8628).
        case device
    }

    /// What a sign-in at an OpenID provider asks for.
    public struct OpenIDSignIn: Sendable {
        /// The account that must sign in, sent to the provider as `login_hint`; `nil` for
        /// whoever the person signs in as.
        public var account: AccountID?
        /// The display name; `nil` for the provider's `name` claim, else the account id.
        public var name: String?
        /// The flow; `nil` to choose: the browser when the provider has one and
        /// ``canOpenBrowser``, else the device flow.
        public var flow: SignInFlow?
        /// How long the person has to complete the sign-in.
        public var timeout: Duration
        /// Whether a browser can be shown on this machine.
        public var canOpenBrowser: Bool

        /// A request with every part given.
        public init(account: AccountID? = nil, name: String? = nil, flow: SignInFlow? = nil, timeout: Duration = .seconds(300),
                    canOpenBrowser: Bool) {
            self.account = account
            self.name = name
            self.flow = flow
            self.timeout = timeout
            self.canOpenBrowser = canOpenBrowser
        }
    }

    /// The end of a sign-in at an OpenID provider: who signed in, and the change.
    public struct OpenIDSignInResult: Sendable {
        /// The account the provider signed in.
        public var account: AccountID
        /// The events and warnings of the change (no event when the account already was signed in).
        public var outcome: ChangeOutcome
    }

    /// `binding` with its provider's endpoints, found by discovery at its issuer. Throws
    /// ``AuthError/protocolError(_:)-enum.case`` naming the field for a document that breaks a
    /// rule, ``AuthError/unavailable(_:detail:)-enum.case`` for a provider that fails or cannot
    /// be reached, ``AuthError/temporaryFailure(_:detail:)-enum.case`` at the deadline. A binding of
    /// another protocol comes back as it is.
    public func discoveringProvider(of binding: ServerBinding) async throws(AuthError) -> ServerBinding {
        guard binding.tokenProtocol == .oidc, let transport else { return binding }
        let exchange = TokenExchange(binding: binding, transport: transport, timeout: serverTimeout.seconds, clock: clock)
        var discovered = binding
        discovered.openID?.provider = try await Discovery(exchange: exchange)
            .provider(at: binding.server, deviceAuthorizationURL: binding.openID?.deviceAuthorizationURL)
        return discovered
    }

    /// Signs in at the service's OpenID provider (or at `binding`'s, which then binds the
    /// service, as ``signIn(account:name:password:register:binding:)`` binds it). Discovery runs
    /// again first; `presenter` shows the person the authorization page or the device code.
    ///
    /// Emits `signed-in` (or the pair of a switch) once the tokens are stored, as a password
    /// sign-in does. A refusal at the provider is ``AuthError/denied(_:)-enum.case``, as is
    /// another account than ``OpenIDSignIn/account``; the deadline
    /// ``AuthError/temporaryFailure(_:detail:)-enum.case``; an ID token that fails a check
    /// ``AuthError/protocolError(_:)-enum.case`` naming it. May show the keyring's unlock prompt,
    /// before the provider is asked.
    public func signIn(at binding: ServerBinding? = nil, _ request: OpenIDSignIn,
                       presenter: any SignInPresenter) async throws(AuthError) -> OpenIDSignInResult {
        let record = try await offload { () throws(AuthError) in try self.settings.read(service: self.service).record }
        guard let bound = binding ?? record.binding, bound.tokenProtocol == .oidc else {
            throw .usage("\(service) is not bound to an OpenID provider; sign in with a password, or bind it with protocol oidc")
        }
        try refuseRebinding(record, to: binding)
        try await offload { () throws(AuthError) in
            let read = try self.settings.read(service: self.service)
            if read.corruption == nil {
                try self.refuseStrandingKeptTokens(read.record, to: bound, then: "sign in with the new binding")
            }
            try self.keyring.unlock()
        }
        let discovered = try await discoveringProvider(of: bound)
        return try await runFlow(discovered, request, presenter: presenter) { (issued, identity) async throws(AuthError) in
            var grant = issued
            grant.tokens.subject = identity.subject
            let name = request.name ?? identity.name ?? identity.account.rawValue
            let outcome = try await self.storeSignIn(grant, account: identity.account, name: name, binding: discovered,
                                                     newBinding: binding.map { _ in discovered }, email: identity.email)
            return OpenIDSignInResult(account: identity.account, outcome: outcome)
        }
    }

    /// Signs the signed-in account in again at its OpenID provider (re-authentication): when
    /// the same account signs in, its new tokens replace the old ones (whose refresh token is
    /// revoked) and no event is emitted; another account is ``AuthError/denied(_:)-enum.case``,
    /// and nothing changes. ``OpenIDSignIn/account`` is ignored: the signed-in account is the
    /// `login_hint`.
    public func verify(_ request: OpenIDSignIn, presenter: any SignInPresenter) async throws(AuthError) -> ChangeOutcome {
        let (user, binding) = try await offload { () throws(AuthError) -> (AccountID, ServerBinding) in
            let record = try self.intactRecord()
            guard let binding = record.binding, binding.tokenProtocol == .oidc else {
                throw .usage("\(self.service) is not bound to an OpenID provider")
            }
            guard let user = try self.signedInAccount(in: record), !self.sessionHasEnded(record) else {
                throw .notSignedIn("nobody is signed in to \(self.service)")
            }
            try self.keyring.unlock()
            return (user, binding)
        }
        var again = request
        again.account = user
        let discovered = try await discoveringProvider(of: binding)
        return try await runFlow(discovered, again, presenter: presenter) { (issued, identity) async throws(AuthError) in
            var stamped = issued
            stamped.tokens.subject = identity.subject
            let grant = stamped
            let (outcome, replaced) = try await offload { () throws(AuthError) -> (ChangeOutcome, Revocation?) in
                let stored = try self.keyring.secret(ItemKey(service: self.service, account: user, server: binding.server))
                let outcome = try self.storeRefreshed(grant, of: user, binding: binding)
                return (outcome, stored.flatMap { self.replacedRevocation(of: $0, by: grant.tokens, binding: discovered) })
            }
            return await self.revoking(replaced, after: outcome)
        }
    }

    // MARK: - The flows

    /// Runs the flow `request` chooses, checks who signed in, and hands the tokens to `complete`,
    /// which stores them. Whatever fails after the provider issued tokens revokes them.
    private func runFlow<Result: Sendable>(
        _ binding: ServerBinding, _ request: OpenIDSignIn, presenter: any SignInPresenter,
        complete: @escaping @Sendable (TokenGrant, SignedInIdentity) async throws(AuthError) -> Result
    ) async throws(AuthError) -> Result {
        guard let provider = binding.openID?.provider, let transport else {
            throw .unavailable("this program cannot reach OpenID providers (no HTTP transport was given)")
        }
        let client = OpenIDClient(binding: binding, provider: provider, transport: transport, timeout: serverTimeout.seconds, clock: clock)
        switch try chooseFlow(request, binding: binding, provider: provider, canPaste: presenter.acceptsPastedAddresses) {
        case .browser(let endpoint):
            let started = ContinuousClock.now
            let ending = try await browserFlow(client, endpoint: endpoint, request, presenter: presenter, complete: complete)
            guard case .turnToDevice(let device) = ending else {
                guard case .signedIn(let result) = ending else { preconditionFailure("a browser flow ends signed in or turned to the device flow") }
                return result
            }
            // The same --timeout: what the browser flow used of it is gone.
            var rest = request
            rest.timeout = max(request.timeout - (ContinuousClock.now - started), .zero)
            let grant = try await deviceFlow(client, endpoint: device, rest, presenter: presenter)
            return try await finish(client, grant, nonce: nil, rest, complete: complete).result
        case .device(let endpoint):
            let grant = try await deviceFlow(client, endpoint: endpoint, request, presenter: presenter)
            return try await finish(client, grant, nonce: nil, request, complete: complete).result
        }
    }

    /// With the tokens: who signed in, whether it is the account asked for, then `complete`.
    /// Any failure revokes the tokens, best effort.
    private func finish<Result: Sendable>(
        _ client: OpenIDClient, _ grant: TokenGrant, nonce: String?, _ request: OpenIDSignIn,
        complete: @Sendable (TokenGrant, SignedInIdentity) async throws(AuthError) -> Result
    ) async throws(AuthError) -> (result: Result, account: AccountID) {
        do throws(AuthError) {
            let identity = try await client.identify(grant, nonce: nonce)
            if let wanted = request.account, identity.account != wanted {
                throw AuthError.denied("the provider signed in \(identity.account), not \(wanted)")
            }
            return (try await complete(grant, identity), identity.account)
        } catch {
            _ = await revoking(Revocation(tokens: grant.tokens, binding: client.binding), after: ChangeOutcome(events: [], warnings: []))
            throw error
        }
    }

    private enum ChosenFlow {
        case browser(ServerURL)
        case device(ServerURL)
    }

    /// The request's flow, else the browser when there is one to show, else the device flow,
    /// else the browser flow with a pasted address when the person can paste one.
    private func chooseFlow(_ request: OpenIDSignIn, binding: ServerBinding, provider: OpenIDProvider,
                            canPaste: Bool) throws(AuthError) -> ChosenFlow {
        let browser = provider.authorizationEndpoint
        let device = binding.openID?.deviceEndpoint
        let noBrowser = AuthError.unavailable("the OpenID provider \(binding.server) has no authorization endpoint, so it has no browser flow")
        let noDevice = AuthError.unavailable("the OpenID provider \(binding.server) names no device authorization endpoint; give it with the binding's device authorization URL, or sign in in the browser")
        switch request.flow {
        case .browser?:
            guard let browser else { throw noBrowser }
            return .browser(browser)
        case .device?:
            guard let device else { throw noDevice }
            return .device(device)
        case nil:
            if let browser, request.canOpenBrowser { return .browser(browser) }
            if let device { return .device(device) }
            guard let browser else { throw noBrowser }
            if canPaste { return .browser(browser) }
            throw .unavailable("no browser can be shown here (neither BROWSER, DISPLAY nor WAYLAND_DISPLAY is set, or this is an SSH session) and the OpenID provider \(binding.server) names no device authorization endpoint; sign in at a terminal, where the address your browser ends on can be pasted")
        }
    }

    /// How a browser flow ended: signed in, or turned to the device flow at `endpoint` because
    /// the browser could not be opened.
    private enum BrowserFlowEnding<Result> {
        case signedIn(Result)
        case turnToDevice(ServerURL)
    }

    /// What came first while the browser flow waited.
    private enum BrowserWait: Sendable {
        case callback(LoopbackListener.Parameters)
        case browserFailed
        case timedOut
    }

    /// The browser flow: the listener, the authorization page, the callback (or the address the
    /// person pastes), the code exchange, then `finish`; the callback's page says how it ended.
    /// Without a flow asked for, a browser that fails to open turns it to the device flow when
    /// the provider has one.
    private func browserFlow<Result: Sendable>(
        _ client: OpenIDClient, endpoint: ServerURL, _ request: OpenIDSignIn, presenter: any SignInPresenter,
        complete: @Sendable (TokenGrant, SignedInIdentity) async throws(AuthError) -> Result
    ) async throws(AuthError) -> BrowserFlowEnding<Result> {
        let proof = SignInProof()
        let listener = try LoopbackListener(port: client.binding.openID?.redirectPort, expectedState: proof.state)
        defer { listener.close() }
        try presenter.showAuthorizationPage(client.authorizationURL(endpoint, redirectURI: listener.redirectURI, proof: proof,
                                                                loginHint: request.account))
        let device = request.flow == nil ? client.binding.openID?.deviceEndpoint : nil
        let waited = await withTaskGroup(of: BrowserWait?.self) { group -> BrowserWait in
            group.addTask { await listener.callback(timeout: request.timeout).map(BrowserWait.callback) ?? .timedOut }
            // Asked even when nothing would follow from it: the presenter tells the person.
            group.addTask { await presenter.browserFailure() != nil && device != nil ? .browserFailed : nil }
            if presenter.acceptsPastedAddresses {
                group.addTask {
                    for await line in presenter.pastedAddresses() {
                        // Taken, the listener hands it to the wait above, as a callback.
                        guard let refusal = listener.offer(pastedAddress: line) else { break }
                        presenter.refusedPastedAddress(refusal)
                    }
                    return nil
                }
            }
            while let next = await group.next() {
                guard let next else { continue }
                group.cancelAll()
                return next
            }
            return .timedOut
        }
        let parameters: LoopbackListener.Parameters
        switch waited {
        case .callback(let received): parameters = received
        case .browserFailed:
            listener.close()
            return .turnToDevice(device!)
        case .timedOut:
            throw .temporaryFailure("the sign-in was not completed in the browser within \(formatSeconds(request.timeout.seconds)) s; \(hint: .raiseSignInTimeout)")
        }
        do {
            let code = try callbackCode(parameters, provider: client.provider, issuer: client.binding.server)
            let grant = try await client.exchange(code: code, redirectURI: listener.redirectURI, proof: proof)
            let (result, account) = try await finish(client, grant, nonce: proof.nonce, request, complete: complete)
            await listener.finish(page: SignInPage.signedIn(service: service, account: account))
            return .signedIn(result)
        } catch {
            await listener.finish(page: SignInPage.failed(error))
            throw error
        }
    }

    /// The code of the callback, after its `error` and RFC 9207's `iss` are looked at.
    private func callbackCode(_ parameters: LoopbackListener.Parameters, provider: OpenIDProvider,
                              issuer: ServerURL) throws(AuthError) -> String {
        func values(_ name: String) -> [String] { parameters.filter { $0.name == name }.map(\.value) }
        let issuers = values("iss")
        if issuers.count > 1 || issuers.contains(where: { $0 != provider.issuer }) {
            throw .protocolError("the browser came back from an issuer other than \(issuer) (RFC 9207 'iss' is '\(TokenExchange.quote(issuers.joined(separator: ", ")))'); nothing was signed in")
        }
        if let error = values("error").first {
            if error == "access_denied" { throw .denied("the sign-in was refused at the provider") }
            let description = values("error_description").first.map { ": " + TokenExchange.quote($0) } ?? ""
            throw .unavailable("the OpenID provider \(issuer) ended the sign-in with '\(TokenExchange.quote(error))'\(description)")
        }
        if provider.announcesIssuerInResponses && issuers.isEmpty {
            throw .protocolError("the browser came back without the 'iss' that the OpenID provider \(issuer) announces (RFC 9207); nothing was signed in")
        }
        let codes = values("code")
        guard codes.count == 1, let code = codes.first, !code.isEmpty, code.utf8.count <= 4096 else {
            throw .protocolError("the browser came back from the OpenID provider \(issuer) without a single authorization code")
        }
        return code
    }

    /// The device flow: the code shown, then the token endpoint polled until the person
    /// approves, refuses, or time runs out.
    private func deviceFlow(_ client: OpenIDClient, endpoint: ServerURL, _ request: OpenIDSignIn,
                            presenter: any SignInPresenter) async throws(AuthError) -> TokenGrant {
        let authorization = try await client.authorizeDevice(at: endpoint)
        try presenter.showDeviceCode(authorization.code)
        let start = clock()
        let codeExpiry = start.addingClamped(authorization.expiresIn.multipliedClamped(by: 1_000_000))
        let timeout = start.addingClamped(UInt64(request.timeout.seconds * 1_000_000))
        var interval = authorization.interval
        var wait = interval
        let end = min(codeExpiry, timeout)
        while true {
            let now = clock()
            let wakeAt = now.addingClamped(wait * 1_000_000)
            // When no poll fits before the end, the person still has until the end: the wait
            // ends when the time given has passed, not when it is known it will.
            let sleepUntil = min(wakeAt, end)
            do {
                try await Task.sleep(for: .microseconds(sleepUntil > now ? sleepUntil - now : 0))
            } catch {
                throw .temporaryFailure("the sign-in was cancelled")
            }
            if wakeAt > end {
                if codeExpiry <= timeout {
                    throw .temporaryFailure("the device code expired before the sign-in was approved; \(hint: .signInAgain)")
                }
                throw .temporaryFailure("the sign-in was not approved within \(formatSeconds(request.timeout.seconds)) s; \(hint: .raiseSignInTimeout)")
            }
            // At least a second, so a poll that starts just before the end still has a chance.
            let left = Double(end > clock() ? end - clock() : 0) / 1_000_000
            switch try await client.poll(authorization, within: max(left, 1)) {
            case .tokens(let grant): return grant
            case .pending: wait = interval
            case .slowDown:
                interval += 5
                wait = interval
            case .noAnswer: wait = min(interval * 2, 60)
            }
        }
    }
}

/// Shows the person what a sign-in at an OpenID provider needs of them. A command line prints
/// the URL and starts the browser; an app opens it in its own way.
public protocol SignInPresenter: Sendable {
    /// The browser flow: `url` is the provider's authorization page, to open in the person's
    /// browser. Called once, before the wait; must not wait for the browser. An error ends
    /// the sign-in, with nothing stored.
    func showAuthorizationPage(_ url: String) throws(AuthError)

    /// The device flow: where to go and which code to enter there. Called once, before polling.
    /// An error (the code could not be shown) ends the sign-in, with nothing stored.
    func showDeviceCode(_ code: DeviceCode) throws(AuthError)

    /// Whether the person can paste here the address their browser ends on (a terminal, say),
    /// for a browser that cannot reach this machine's listener. `false` by default.
    var acceptsPastedAddresses: Bool { get }

    /// The browser flow, when the device flow could take over: waits, after
    /// ``showAuthorizationPage(_:)``, until the browser is known not to have opened (it could
    /// not be started, or it failed at once) and returns what happened, having told the person;
    /// `nil` once it is known to have started or this cannot be known. Must end soon when the
    /// task is cancelled. By default `nil` at once.
    func browserFailure() async -> String?

    /// The lines the person pastes, each meant to be the address their browser ended on. Asked
    /// once per browser flow, when ``acceptsPastedAddresses``; iteration stops at the sign-in's
    /// end. By default none.
    func pastedAddresses() -> AsyncStream<String>

    /// A pasted line that was not taken, and why (one line); the wait goes on. By default
    /// nothing is said.
    func refusedPastedAddress(_ reason: String)
}

extension SignInPresenter {
    /// No address can be pasted.
    public var acceptsPastedAddresses: Bool { false }
    /// Nothing is known of the browser.
    public func browserFailure() async -> String? { nil }
    /// No line is ever pasted.
    public func pastedAddresses() -> AsyncStream<String> { AsyncStream { $0.finish() } }
    /// Nothing is said.
    public func refusedPastedAddress(_ reason: String) {}
}
