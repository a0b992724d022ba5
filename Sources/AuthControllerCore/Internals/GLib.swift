// SPDX-License-Identifier: Apache-2.0
internal import CGLib
internal import CLibsoup
internal import CLibsecret
import Dispatch
import Synchronization

/// A GLib error copied into Swift. The `GError` it came from is freed by ``GLibError/take(_:)``,
/// the only place that frees one.
struct GLibError: Error, Sendable {
    enum Domain: Sendable, Equatable {
        case io, dbus, keyFile, tls, resolver, soup, secret, other(String)
    }

    let domain: Domain
    let code: Int32
    let message: String
    /// The D-Bus error name when the error came from a remote peer
    /// (e.g. `org.freedesktop.DBus.Error.ServiceUnknown`).
    let remoteName: String?
    /// The D-Bus interface of the method whose call failed, when the caller recorded it: the
    /// same error name means different things from different interfaces.
    var interface: String? = nil

    /// `domain:code: message`, for bug reports.
    var debugDescription: String {
        let name: String
        switch domain {
        case .io: name = "g-io-error-quark"
        case .dbus: name = "g-dbus-error-quark"
        case .keyFile: name = "g-key-file-error-quark"
        case .tls: name = "g-tls-error-quark"
        case .resolver: name = "g-resolver-error-quark"
        case .soup: name = "soup_session_error_quark"
        case .secret: name = "secret-error"
        case .other(let quark): name = quark
        }
        return "\(name):\(code): \(message)"
    }

    /// libsecret's `SECRET_ERROR_IS_LOCKED`: the item or collection stayed locked.
    var isSecretServiceLocked: Bool { domain == .secret && code == 2 }

    /// libsecret's `SECRET_ERROR_PROTOCOL`: what the service sent does not decode — among other
    /// causes, a secret encrypted with a key the two sides derived differently.
    var isSecretServiceProtocolError: Bool { domain == .secret && code == 1 }

    var isCancelled: Bool { domain == .io && code == Int32(G_IO_ERROR_CANCELLED.rawValue) }

    /// Copies and frees `error`. The corresponding C function is `g_error_free`.
    static func take(_ error: UnsafeMutablePointer<GError>) -> GLibError {
        defer { g_error_free(error) }
        let quark = error.pointee.domain
        let domain: Domain
        switch quark {
        case authctl_io_error_quark(): domain = .io
        case authctl_dbus_error_quark(): domain = .dbus
        case authctl_key_file_error_quark(): domain = .keyFile
        case authctl_tls_error_quark(): domain = .tls
        case authctl_resolver_error_quark(): domain = .resolver
        case _ where quark != 0 && quark == authctl_soup_session_error_quark(): domain = .soup
        case _ where quark != 0 && quark == authctl_secret_error_quark(): domain = .secret
        default: domain = .other(String(cString: g_quark_to_string(quark)))
        }
        var remoteName: String?
        if g_dbus_error_is_remote_error(error) != 0, let name = g_dbus_error_get_remote_error(error) {
            remoteName = String(cString: name)
            g_free(name)
        }
        let message = error.pointee.message.map { String(cString: $0) } ?? ""
        return GLibError(domain: domain, code: error.pointee.code, message: message, remoteName: remoteName)
    }
}

/// Calls `body` with a `GError **` and throws what it reports.
func withGError<T>(_ body: (UnsafeMutablePointer<UnsafeMutablePointer<GError>?>) -> T) throws(GLibError) -> T {
    var error: UnsafeMutablePointer<GError>?
    let result = body(&error)
    if let error { throw GLibError.take(error) }
    return result
}

/// Converts a `gchar *` that the caller owns into a `String` and frees it.
func takeString(_ pointer: UnsafeMutablePointer<gchar>?) -> String? {
    guard let pointer else { return nil }
    defer { g_free(pointer) }
    return String(cString: pointer)
}

/// A `GCancellable` that cancels itself when its time is up. Every Secret Service and D-Bus
/// call takes one, because a Secret Service call otherwise waits forever for a prompt nobody
/// sees; cancelling also dismisses such a prompt.
final class Deadline: @unchecked Sendable {
    // Sendable: `cancellable` never changes and `GCancellable` is thread-safe; the timer
    // touches it only under `state`'s lock, before `deinit` releases it.
    let cancellable: UnsafeMutablePointer<GCancellable>
    let seconds: Double
    private final class State: Sendable {
        let flags = Mutex<(finished: Bool, expired: Bool)>((false, false))
    }
    private let state = State()
    private let timer: DispatchWorkItem

    init(seconds: Double) {
        let cancellable = g_cancellable_new()!
        self.cancellable = cancellable
        self.seconds = seconds
        let state = self.state
        // The timer holds no reference to `self`: it may fire while `deinit` runs, so it
        // checks `finished` under the lock before touching the cancellable.
        let cancellableAddress = UInt(bitPattern: cancellable)
        timer = DispatchWorkItem {
            state.flags.withLock { state in
                guard !state.finished else { return }
                state.expired = true
                g_cancellable_cancel(UnsafeMutablePointer(bitPattern: cancellableAddress))
            }
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds, execute: timer)
    }

    /// Whether the deadline passed (and the cancellable was cancelled because of it).
    var expired: Bool { state.flags.withLock { $0.expired } }

    /// Disarms the timer, waiting for a cancellation already under way: afterwards no
    /// cancellation handler runs, so objects that handlers touch (libsoup's request) may go.
    func finish() {
        state.flags.withLock { $0.finished = true }
        timer.cancel()
    }

    deinit {
        state.flags.withLock { $0.finished = true }
        timer.cancel()
        g_object_unref(cancellable)
    }
}
