// SPDX-License-Identifier: Apache-2.0
/// The binding of a service to a token server, kept in the settings file beside the session.
extension AuthController {
    /// The service's binding, `nil` when it has none. Blocks briefly on the settings file;
    /// never prompts.
    public func binding() throws(AuthError) -> ServerBinding? {
        try intactRecord().binding
    }

    /// Binds the service to a token server, or (with `nil`) removes the binding. Refused with
    /// ``AuthError/invalidInput(_:)-enum.case`` while someone is signed in ("sign out first"), and,
    /// for another server or none, while the keyring keeps tokens at the current server
    /// (signed out with `keepingCredentials`, or switched away from): they would be out of reach
    /// of ``accounts()`` and ``forget(_:)``, so the message names their accounts to forget
    /// first. Blocks on the settings lock and the keyring; never prompts and never asks the
    /// server.
    public func setBinding(_ binding: ServerBinding?) throws(AuthError) {
        _ = try change { (read, record) throws(AuthError) -> Change in
            if let corruption = read.corruption { throw .settingsUnsafe(corruption) }
            if let user = record.user {
                throw .invalidInput("\(user) is signed in to \(service); \(hint: .signOutFirst), then change the server")
            }
            try refuseStrandingKeptTokens(record, to: binding, then: "change the server")
            var updated = record
            updated.binding = binding
            return Change(record: updated)
        }
    }

    /// Refuses a sign-in with `binding` while someone is signed in with another one (or locally).
    func refuseRebinding(_ record: SessionRecord, to binding: ServerBinding?) throws(AuthError) {
        guard let binding, let user = record.user, record.binding != binding else { return }
        let current = record.binding
        let difference = current == nil ? "with a local password"
            : current?.server != binding.server ? "at \(current!.server)"
            : "with another protocol, client id, scope or revoke URL at \(binding.server)"
        throw .invalidInput("\(user) is signed in to \(service) \(difference); \(hint: .signOutFirst), then sign in with the new binding")
    }

    /// Refuses a move from the current binding's server to `binding`'s (`nil`: no server) while
    /// the keyring keeps tokens there that nobody is signed in with: no refresh token is left
    /// live and out of reach of ``accounts()`` and ``forget(_:)``. `then` is the step after
    /// forgetting them. Blocks on the keyring; never prompts.
    func refuseStrandingKeptTokens(_ record: SessionRecord, to binding: ServerBinding?, then: String) throws(AuthError) {
        guard let current = record.binding, binding?.server != current.server else { return }
        let kept = try keyring.accounts(service: service, server: current.server).sorted()
        guard !kept.isEmpty else { return }
        let names = kept.map(\.rawValue).joined(separator: ", ")
        throw .invalidInput("the keyring keeps tokens of \(names) at \(current.server) for \(service), which would be out of reach; \(hint: .forgetFirst(kept)), then \(then)")
    }
}
