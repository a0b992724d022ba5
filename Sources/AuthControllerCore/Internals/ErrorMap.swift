// SPDX-License-Identifier: Apache-2.0
internal import CGLib

/// The one map from a GLib error to an ``AuthError``: what a deadline, a missing bus, a
/// missing Secret Service, a peer that went away, a locked collection, or an unreachable token
/// server becomes, and with which message. Every GLib error of the library passes here.
enum ErrorMap {
    /// Who a failing call was talking to: the message names it.
    enum Peer: Sendable, Equatable {
        case bus, secretService
        /// A token server, by the URL asked.
        case tokenServer(String)
    }

    static let noSessionBusAdvice: AuthError.Message = "run inside a desktop session, under `dbus-run-session`, or \(hint: .sandbox)"

    /// What went wrong with the session bus, without the advice (`doctor` gives it as the fix).
    static func noSessionBus(_ error: GLibError) -> String {
        error.isDisconnection ? "the session bus went away (\(error.message))" : "no session bus (\(error.message))"
    }


    /// The one mapping from a GLib error to an ``AuthError``: what a deadline, a missing bus,
    /// a missing Secret Service, a peer that went away or a locked collection becomes.
    /// `detail` keeps the GLib domain and code for bug reports.
    static func authError(_ error: GLibError, from peer: Peer, while what: String, deadline: Deadline) -> AuthError {
        let detail = error.debugDescription
        if case .tokenServer(let server) = peer { return tokenServerError(error, server: server, deadline: deadline) }
        if error.isCancelled || error.isTimeout { return deadlinePassed(on: peer, while: what, seconds: deadline.seconds, detail: detail) }
        if peer == .bus && error.remoteName == nil {
            // Typed, so that the advice keeps its hint.
            let message: AuthError.Message = "\(noSessionBus(error)); \(noSessionBusAdvice)"
            return .unavailable(message, detail: detail)
        }
        if error.isNoOwner {
            return .unavailable("no Secret Service on the session bus; start gnome-keyring-daemon (Debian package gnome-keyring), or run \(hint: .sandbox)",
                                detail: detail)
        }
        if error.isDisconnection { return wentAway(on: peer, while: what, detail: detail) }
        if error.remoteName == "org.freedesktop.Secret.Error.IsLocked" { return .keyringLocked }
        // The Secret Service's or the bus's own words, which a hostile peer chooses.
        return .unavailable("could not \(what): \(error.message.peerText(limit: 200))", detail: detail)
    }

    /// The bus or the Secret Service did not answer within `seconds`.
    static func deadlinePassed(on peer: Peer, while what: String, seconds: Double, detail: String? = nil) -> AuthError {
        let seconds = formatSeconds(seconds)
        switch peer {
        case .bus:
            return .temporaryFailure("the session bus did not answer within \(seconds) s; try again, or \(hint: .raiseKeyringTimeout)",
                                     detail: detail)
        case .secretService, .tokenServer:
            return .temporaryFailure("could not \(what): the Secret Service did not answer within \(seconds) s; nothing was changed — try again, or \(hint: .raiseKeyringTimeout)",
                                     detail: detail)
        }
    }

    /// The bus or the Secret Service went away while a call waited for its reply.
    static func wentAway(on peer: Peer, while what: String, detail: String? = nil) -> AuthError {
        .temporaryFailure("could not \(what): the \(peer == .bus ? "session bus" : "Secret Service") went away mid-call; nothing was changed — try again",
                          detail: detail)
    }

    /// A request to a token server that got no HTTP answer: the deadline (a temporary failure),
    /// a certificate that is not trusted, a connection refused, reset or closed, a name that
    /// does not resolve (unavailable), or something that is not HTTP (a protocol error).
    private static func tokenServerError(_ error: GLibError, server: String, deadline: Deadline) -> AuthError {
        let detail = error.debugDescription
        if error.isCancelled || error.isTimeout || deadline.expired {
            return .temporaryFailure("the token server \(server) did not answer within \(formatSeconds(deadline.seconds)) s; try again, or \(hint: .raiseServerTimeout)",
                                     detail: detail)
        }
        switch error.domain {
        case .tls:
            return .unavailable("the TLS connection to the token server \(server) failed (\(error.message)); authctl always verifies certificates against the system's store",
                                detail: detail)
        case .soup:
            return .protocolError("the token server \(server) answered with something that is not HTTP (\(error.message))")
        default:
            return .unavailable("cannot reach the token server \(server) (\(error.message)); check the URL and that the server is up",
                                detail: detail)
        }
    }
}

extension ErrorMap {
    /// A request through `proxy` that failed before the proxy answered its `CONNECT`: the proxy
    /// cannot be reached, failed, or did not answer by the deadline. Never retried directly.
    static func proxyError(_ error: GLibError, proxy: HTTPProxy, server: String, deadline: Deadline) -> AuthError {
        let detail = error.debugDescription
        if error.isCancelled || error.isTimeout || deadline.expired {
            return .temporaryFailure("the proxy \(proxy.name) did not open the way to \(server) within \(formatSeconds(deadline.seconds)) s; try again, or \(hint: .raiseServerTimeout)",
                                     detail: detail)
        }
        if error.domain == .soup {
            return .unavailable("the proxy \(proxy.name) answered with something that is not HTTP (\(error.message.peerText(limit: 200)))", detail: detail)
        }
        return .unavailable("cannot reach the proxy \(proxy.name) named by \(proxy.variable) (\(error.message.peerText(limit: 200))); check \(proxy.variable) and that the proxy is up",
                            detail: detail)
    }

    /// D-Bus error names that say the peer or the connection went away.
    static let disconnectionErrorNames = ["org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Disconnected"]
}

extension GLibError {
    var isTimeout: Bool {
        (domain == .io && code == Int32(G_IO_ERROR_TIMED_OUT.rawValue))
            || ["org.freedesktop.DBus.Error.TimedOut", "org.freedesktop.DBus.Error.Timeout"].contains(remoteName ?? "")
            || (domain == .dbus && [G_DBUS_ERROR_TIMED_OUT, G_DBUS_ERROR_TIMEOUT].map { Int32($0.rawValue) }.contains(code))
    }

    /// The peer or the connection went away.
    var isDisconnection: Bool {
        ErrorMap.disconnectionErrorNames.contains(remoteName ?? "")
            || (domain == .dbus && [G_DBUS_ERROR_NO_REPLY, G_DBUS_ERROR_DISCONNECTED].map { Int32($0.rawValue) }.contains(code))
            || (domain == .io && [G_IO_ERROR_CLOSED, G_IO_ERROR_BROKEN_PIPE, G_IO_ERROR_CONNECTION_CLOSED].map { Int32($0.rawValue) }.contains(code))
    }

    /// Nobody owns the name called (the Secret Service is not running).
    var isNoOwner: Bool {
        ["org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner",
         "org.freedesktop.DBus.Error.Spawn.ServiceNotFound", "org.freedesktop.DBus.Error.Spawn.ChildExited"].contains(remoteName ?? "")
            || (domain == .dbus && [G_DBUS_ERROR_SERVICE_UNKNOWN, G_DBUS_ERROR_NAME_HAS_NO_OWNER].map { Int32($0.rawValue) }.contains(code))
    }

    /// KWallet refused libsecret's encrypted session, so the call was not carried out: about one
    /// `OpenSession` in a hundred sends a Diffie-Hellman public key one byte short (its leading
    /// zero byte dropped), which KWallet answers "Client public key size is invalid", and now and
    /// then KWallet loses a session it opened ("Can't find session …") and refuses a write made
    /// in it. A call on a new session goes through. Matched by name and words, so that no other
    /// refusal is taken for one. libsecret hands the first on without its D-Bus name (as GIO's
    /// `INVALID_ARGS`).
    var isRefusedSession: Bool {
        let invalidArguments = remoteName == "org.freedesktop.DBus.Error.InvalidArgs"
            || (domain == .dbus && code == Int32(G_DBUS_ERROR_INVALID_ARGS.rawValue))
        return (invalidArguments && message.contains("public key")) || message.hasPrefix("Can't find session")
    }
}

/// `5` rather than `5.0`, `0.5` as is.
func formatSeconds(_ seconds: Double) -> String {
    if seconds == seconds.rounded() && abs(seconds) < 1e15 { return String(Int64(seconds)) }
    // A deadline computed from what is left of another (doctor's) reads as 2.35, not 2.3479712190005557.
    if seconds >= 0.1 && abs(seconds) < 1e15 {
        let hundredths = (seconds * 100).rounded()
        return hundredths.truncatingRemainder(dividingBy: 100) == 0 ? String(Int64(hundredths / 100)) : String(hundredths / 100)
    }
    return String(seconds)
}
