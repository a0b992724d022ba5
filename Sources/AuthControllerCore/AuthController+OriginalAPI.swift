// SPDX-License-Identifier: Apache-2.0
/// The original synchronous API, kept for the callers it was written for: each member is a
/// convenience over one operation of the full API, which its comment names, and blocks the
/// calling thread for as long as that operation takes (hashing, the keyring, its unlock prompt).
///
/// New code calls the full API: ``signIn(account:name:password:register:binding:)``,
/// ``signOut(keepingCredentials:)`` and ``status()``, which serve bound services too, return the
/// events they emitted, and never hide a failure behind `false` or `nil`.
extension AuthController {
    /// Signs `user` in to a service of local accounts: enrols a new account, or verifies the
    /// password of a known one. `user.email` is the account id, `user.name` the display name.
    ///
    /// A convenience that makes the local sign-in of
    /// ``signIn(account:name:password:register:binding:)`` on the calling thread: it blocks for
    /// the hashing time and may show the keyring's unlock prompt. A service bound to a token
    /// server is refused with ``AuthError/unavailable(_:detail:)-enum.case``: signing in there asks the
    /// server, which only the `async` operation does.
    public func signIn(_ user: User, password: String) throws(AuthError) {
        let account = try AccountID(validating: user.email)
        let name = try DisplayName.validate(user.name)
        let password = try Password(password)
        try refuseIfBound(use: "signIn(account:name:password:register:binding:)", because: "which asks it")
        try signInLocally(account: account, name: name, password: password)
    }

    /// Signs the current account out of a service of local accounts and deletes its stored hash.
    /// Nobody signed in is not an error.
    ///
    /// A convenience that makes ``signOut(keepingCredentials:)`` with `keepingCredentials: false`
    /// on the calling thread: it blocks on the keyring and may show its unlock prompt. A service
    /// bound to a token server is refused with ``AuthError/unavailable(_:detail:)-enum.case``: its sign-out
    /// revokes the refresh token at the server, which only the `async` operation does.
    public func signOut() throws(AuthError) {
        try refuseIfBound(use: "signOut(keepingCredentials: false)", because: "which revokes its tokens there")
        try signingOut(keepingCredentials: false)
    }

    /// Whether someone is signed in (the settings name a user whose keyring item exists, and a
    /// bound session has not expired): ``status()``'s ``LoginStatus/isSignedIn``, `false` when
    /// that cannot be found out. Blocks on the keyring briefly; never prompts. The D-Bus
    /// property `SignedIn` of `serve` tells the same.
    public var isSignedIn: Bool { (try? status().isSignedIn) ?? false }

    /// The signed-in user, or `nil` (also when that cannot be found out): ``status()``'s account
    /// id and display name. Blocks on the keyring briefly; never prompts.
    public var currentUser: User? {
        guard let status = try? status(), let user = status.account else { return nil }
        return User(name: status.name ?? "", email: user.rawValue)
    }

    /// Throws ``AuthError/unavailable(_:detail:)-enum.case`` when the service is bound to a token server:
    /// what a synchronous call of the original API cannot do there, the `async` one named
    /// `asyncOperation` does.
    func refuseIfBound(use asyncOperation: String, because reason: String) throws(AuthError) {
        if let binding = try settings.read(service: service).record.binding {
            throw .unavailable("\(service) is bound to the token server \(binding.server); use `await \(asyncOperation)`, \(reason)")
        }
    }
}
