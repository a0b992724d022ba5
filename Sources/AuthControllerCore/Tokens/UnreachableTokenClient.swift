// SPDX-License-Identifier: Apache-2.0
/// The token client of a controller made without a transport: every call fails.
struct UnreachableTokenClient: TokenClient {
    private static let failure = AuthError.unavailable("this program cannot reach token servers (no HTTP transport was given)")
    func signIn(account: AccountID, password: Password, register: Bool) async throws(AuthError) -> TokenGrant { throw Self.failure }
    func refresh(_ tokens: TokenSet) async throws(AuthError) -> TokenGrant { throw Self.failure }
    func revoke(_ tokens: TokenSet) async throws(AuthError) { throw Self.failure }
}
