// SPDX-License-Identifier: Apache-2.0
@testable import AuthControllerCore
import Testing

/// Which libsecret failures are a session KWallet refused — tried once more on a new session —
/// and which are not: a retry must never follow a refusal that means what it says.
@Suite("A refused Secret Service session")
struct RefusedSessionTests {
    @Test("KWallet's refusals of a session are recognised, by D-Bus name or as libsecret hands them on", arguments: [
        GLibError(domain: .other("g-io-error-quark"), code: 36, message: "Client public key size is invalid",
                  remoteName: "org.freedesktop.DBus.Error.InvalidArgs"),
        GLibError(domain: .io, code: 36, message: "Can't find session /org/freedesktop/secrets/session/61",
                  remoteName: "org.qtproject.QtDBus.Error.InvalidObjectPath"),
        GLibError(domain: .io, code: 36, message: "Can't find session /org/freedesktop/secrets/session/108", remoteName: nil),
    ])
    func refused(_ error: GLibError) {
        #expect(error.isRefusedSession, "\(error.debugDescription)")
    }

    @Test("other refusals are not taken for one", arguments: [
        GLibError(domain: .io, code: 36, message: "Invalid attribute name", remoteName: "org.freedesktop.DBus.Error.InvalidArgs"),
        GLibError(domain: .io, code: 36, message: "Client public key size is invalid", remoteName: "org.freedesktop.DBus.Error.AccessDenied"),
        GLibError(domain: .secret, code: 2, message: "Cannot get secret of a locked object", remoteName: nil),
        GLibError(domain: .io, code: 36, message: "No such object path '/org/freedesktop/secrets/session/61'",
                  remoteName: "org.freedesktop.DBus.Error.UnknownObject"),
    ])
    func notRefused(_ error: GLibError) {
        #expect(!error.isRefusedSession, "\(error.debugDescription)")
    }
}
