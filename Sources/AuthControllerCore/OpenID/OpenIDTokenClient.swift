// SPDX-License-Identifier: Apache-2.0
/// Refresh and revocation at an OpenID provider: RFC 6749's refresh at the discovered token
/// endpoint, with the new ID token checked against the stored one (OpenID Connect Core §12.2),
/// and RFC 7009's revocation at the discovered revocation endpoint (or the revoke URL given).
struct OpenIDTokenClient: TokenClient {
    let binding: ServerBinding
    let transport: any HTTPTransport
    let timeout: Double
    let clock: @Sendable () -> UInt64

    /// The password grant is not for OpenID providers: their accounts sign in in the browser or
    /// with a device code.
    func signIn(account: AccountID, password: Password, register: Bool) async throws(AuthError) -> TokenGrant {
        throw .usage("\(binding.server) is an OpenID provider: its accounts sign in in the browser or with a device code, never with a password")
    }

    func refresh(_ tokens: TokenSet) async throws(AuthError) -> TokenGrant {
        let provider = try self.provider()
        var grant = try await oauth2(provider).refresh(tokens)
        grant.tokens.subject = tokens.subject
        guard let idToken = grant.tokens.idToken else {
            // No new ID token: the stored one stays.
            grant.tokens.idToken = tokens.idToken
            return grant
        }
        let client = OpenIDClient(binding: binding, provider: provider, transport: transport, timeout: timeout, clock: clock)
        do throws(AuthError) {
            let claims = try await client.verified(idToken, nonce: nil, clockOffset: grant.clockOffset, refreshing: tokens.idToken)
            if let subject = tokens.subject, claims.subject != subject {
                throw AuthError.protocolError("the refreshed ID token names another subject than the signed-in one")
            }
        } catch {
            switch error {
            case .unavailable, .temporaryFailure:
                // The keys could not be fetched: the new ID token is not kept, but the access and
                // refresh tokens are — the provider has rotated the refresh token, and dropping the
                // new one would end the session at the next refresh.
                grant.tokens.idToken = tokens.idToken
            default:
                throw error.adding("; the stored tokens stay")
            }
        }
        return grant
    }

    func revoke(_ tokens: TokenSet) async throws(AuthError) {
        guard binding.revocationURL != nil else { return }
        try await oauth2(try provider()).revoke(tokens)
    }

    private func provider() throws(AuthError) -> OpenIDProvider {
        guard let provider = binding.openID?.provider else {
            throw .unavailable("the endpoints of the OpenID provider \(binding.server) are not known; \(hint: .signInAgain)")
        }
        return provider
    }

    /// RFC 6749's refresh and RFC 7009's revocation, as for a token server of protocol `oauth2`
    /// whose token endpoint is the provider's.
    private func oauth2(_ provider: OpenIDProvider) -> OAuth2TokenClient {
        var endpoint = binding
        endpoint.server = provider.tokenEndpoint
        endpoint.tokenProtocol = .oauth2
        endpoint.revokeURL = binding.revocationURL
        endpoint.scope = nil
        return OAuth2TokenClient(binding: endpoint, transport: transport, timeout: timeout, clock: clock, keepingIDToken: true)
    }
}
