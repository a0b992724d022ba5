// SPDX-License-Identifier: Apache-2.0
/// Turns passwords into stored secrets and checks passwords against them.
public protocol PasswordHasher: Sendable {
    /// A new encoded hash of `password` with a fresh random salt. Blocks for the hashing time.
    func hash(_ password: Password) throws(AuthError) -> String

    /// Checks `password` against `encoded` in constant time. A match may carry a re-hash with
    /// stronger parameters that the caller should store (upgrade on login).
    func verify(_ password: Password, against encoded: String) -> PasswordVerification
}

/// The result of ``PasswordHasher/verify(_:against:)``.
public enum PasswordVerification: Equatable, Sendable {
    /// The password matches; `upgradedHash` is set when the stored parameters were weaker
    /// than the current defaults.
    case match(upgradedHash: String?)
    /// The password does not match.
    case mismatch
    /// `encoded` is not a hash this hasher can verify (written by another tool, out of sane
    /// bounds, or empty); it was never fed to the hashing function.
    case unusable(reason: String)
    /// Verifying could not run (out of memory, no threads): says nothing about the hash.
    case failed(AuthError)
}
