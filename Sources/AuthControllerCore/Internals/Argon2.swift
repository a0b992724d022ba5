// SPDX-License-Identifier: Apache-2.0
internal import CArgon2

/// Thin adapters over libargon2, the reference Argon2 implementation.
enum Argon2 {
    enum Failure: Error { case library(String) }

    /// The corresponding C function is `argon2id_hash_encoded`.
    static func idHashEncoded(password: UnsafeRawBufferPointer, salt: [UInt8], timeCost: UInt32, memoryKiB: UInt32,
                              parallelism: UInt32, tagLength: Int) throws(Failure) -> String {
        let length = argon2_encodedlen(timeCost, memoryKiB, parallelism, UInt32(salt.count), UInt32(tagLength), Argon2_id)
        var encoded = [CChar](repeating: 0, count: length + 1)
        let status = salt.withUnsafeBytes { saltBytes in
            argon2id_hash_encoded(timeCost, memoryKiB, parallelism, password.baseAddress, password.count,
                                  saltBytes.baseAddress, saltBytes.count, tagLength, &encoded, encoded.count)
        }
        guard status == ARGON2_OK.rawValue else { throw .library(errorMessage(status)) }
        return String(decoding: encoded.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    enum Verification { case match, mismatch, failed(String), systemFailure(String) }

    /// Constant-time comparison of the recomputed tag. The corresponding C function is `argon2id_verify`.
    static func idVerify(encoded: String, password: UnsafeRawBufferPointer) -> Verification {
        let status = argon2id_verify(encoded, password.baseAddress, password.count)
        switch status {
        case ARGON2_OK.rawValue: return .match
        case ARGON2_VERIFY_MISMATCH.rawValue: return .mismatch
        case ARGON2_MEMORY_ALLOCATION_ERROR.rawValue, ARGON2_THREAD_FAIL.rawValue: return .systemFailure(errorMessage(status))
        default: return .failed(errorMessage(status))
        }
    }

    /// The corresponding C function is `argon2_error_message`.
    static func errorMessage(_ status: Int32) -> String { String(cString: argon2_error_message(status)) }
}
