// SPDX-License-Identifier: Apache-2.0
extension AuthError {
    /// The D-Bus error `authctl serve` answers a failed call with: one per exit-code family,
    /// as ``exitCode`` gives one exit status per family.
    package var dbusErrorName: String {
        switch self {
        case .notSignedIn: "io.github.authctl.Error.NotSignedIn"
        case .usage, .invalidInput: "io.github.authctl.Error.InvalidInput"
        case .unavailable: "io.github.authctl.Error.Unavailable"
        case .temporaryFailure: "io.github.authctl.Error.Timeout"
        case .denied: "io.github.authctl.Error.Denied"
        case .protocolError: "io.github.authctl.Error.Protocol"
        case .settingsUnsafe: "io.github.authctl.Error.SettingsUnsafe"
        case .settingsIO: "io.github.authctl.Error.SettingsIO"
        }
    }
}
