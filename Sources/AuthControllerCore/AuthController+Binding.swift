/// The binding of a service to a token server, kept in the settings file beside the session.
extension AuthController {
    /// The service's binding, `nil` when it has none. Blocks briefly on the settings file;
    /// never prompts.
    public func binding() throws(AuthError) -> ServerBinding? {
        try intactRecord().binding
    }

    /// Binds the service to a token server, or (with `nil`) removes the binding. Refused with
    /// ``AuthError/invalidInput(_:)-enum.case`` (65, "sign out first") while someone is signed in. Blocks
    /// on the settings lock; never prompts and never asks the server.
    public func setBinding(_ binding: ServerBinding?) throws(AuthError) {
        _ = try change { (read, record) throws(AuthError) -> Change in
            if let corruption = read.corruption { throw .settingsUnsafe(corruption) }
            if let user = record.user {
                throw .invalidInput("\(user) is signed in to \(service); \(hint: .signOutFirst), then change the server")
            }
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
}
