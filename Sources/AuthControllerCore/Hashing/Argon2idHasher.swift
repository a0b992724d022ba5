// SPDX-License-Identifier: Apache-2.0
/// Argon2id through libargon2, stored as PHC strings
/// (`$argon2id$v=19$m=65536,t=3,p=4$salt$tag`).
public struct Argon2idHasher: PasswordHasher {
    /// Argon2id cost parameters.
    public struct Parameters: Equatable, Sendable, CustomStringConvertible {
        /// Memory in KiB.
        public var memoryKiB: UInt32
        /// Passes over memory.
        public var iterations: UInt32
        /// Lanes.
        public var parallelism: UInt32

        /// Parameters of your own; ``standard`` is what new hashes use by default.
        public init(memoryKiB: UInt32, iterations: UInt32, parallelism: UInt32) {
            self.memoryKiB = memoryKiB
            self.iterations = iterations
            self.parallelism = parallelism
        }

        /// RFC 9106's second recommended option: m=64 MiB, t=3, p=4.
        public static let standard = Parameters(memoryKiB: 65536, iterations: 3, parallelism: 4)

        /// Each parameter the larger of the two: an upgrade never weakens a hash.
        func strengthened(toAtLeast other: Parameters) -> Parameters {
            Parameters(memoryKiB: max(memoryKiB, other.memoryKiB), iterations: max(iterations, other.iterations),
                       parallelism: max(parallelism, other.parallelism))
        }

        func isWeaker(than other: Parameters) -> Bool {
            memoryKiB < other.memoryKiB || iterations < other.iterations || parallelism < other.parallelism
        }

        /// The parameters as a PHC string writes them: `m=65536,t=3,p=4`.
        public var description: String { "m=\(memoryKiB),t=\(iterations),p=\(parallelism)" }
    }

    /// Sanity bounds for stored hashes; anything outside is never fed to the hasher.
    static let maximumEncodedLength = 256
    static let maximumMemoryKiB: UInt32 = 1_048_576
    static let maximumIterations: UInt32 = 64
    static let maximumParallelism: UInt32 = 64
    static let saltLength = 16
    static let tagLength = 32

    /// The parameters of new hashes, and the floor for upgrades.
    public let parameters: Parameters

    /// A hasher that makes new hashes with `parameters` and upgrades weaker stored ones to them.
    public init(parameters: Parameters = .standard) {
        self.parameters = parameters
    }

    /// Argon2id of the password's normalised bytes with a fresh 16-byte salt, as a PHC string with
    /// a 32-byte tag. Blocks for the hashing time.
    /// The corresponding C function is `argon2id_hash_encoded`.
    public func hash(_ password: Password) throws(AuthError) -> String {
        try hash(password, with: parameters)
    }

    /// Checks the PHC string's parameters against sane bounds before anything else, then verifies
    /// in constant time; a match on a hash weaker than ``parameters`` carries a re-hash with, for
    /// each parameter, the larger of the two. Blocks for the hashing time. The corresponding C
    /// function is `argon2id_verify`.
    public func verify(_ password: Password, against encoded: String) -> PasswordVerification {
        let stored: Parameters
        do {
            stored = try Self.parameters(ofEncoded: encoded)
        } catch {
            return .unusable(reason: error.reason)
        }
        let outcome = password.withNormalizedBytes { Argon2.idVerify(encoded: encoded, password: $0) }
        switch outcome {
        case .mismatch:
            return .mismatch
        case .failed(let message):
            return .unusable(reason: "libargon2 cannot verify it (\(message))")
        case .systemFailure(let message):
            return .failed(.unavailable("password verification could not run: \(message); free some memory and try again"))
        case .match:
            guard stored.isWeaker(than: parameters) else { return .match(upgradedHash: nil) }
            // An upgrade that fails to compute is not worth failing the sign-in for.
            return .match(upgradedHash: try? hash(password, with: stored.strengthened(toAtLeast: parameters)))
        }
    }

    private func hash(_ password: Password, with parameters: Parameters) throws(AuthError) -> String {
        let salt = Posix.randomBytes(Self.saltLength)
        let result = password.withNormalizedBytes { bytes in
            Result { () throws(Argon2.Failure) in
                try Argon2.idHashEncoded(password: bytes, salt: salt, timeCost: parameters.iterations,
                                         memoryKiB: parameters.memoryKiB, parallelism: parameters.parallelism,
                                         tagLength: Self.tagLength)
            }
        }
        switch result {
        case .success(let encoded): return encoded
        case .failure(.library(let message)):
            throw .unavailable("password hashing failed: \(message); check that libargon2 is installed and memory is available")
        }
    }

    struct UnusableHash: Error { let reason: String }

    /// Parses and bounds-checks a PHC Argon2id string without running Argon2.
    static func parameters(ofEncoded encoded: String) throws(UnusableHash) -> Parameters {
        guard !encoded.isEmpty else { throw UnusableHash(reason: "it is empty") }
        guard encoded.utf8.count <= maximumEncodedLength else {
            throw UnusableHash(reason: "it is longer than \(maximumEncodedLength) characters")
        }
        let fields = encoded.split(separator: "$", omittingEmptySubsequences: false)
        guard fields.count == 6, fields[0].isEmpty, fields[1] == "argon2id" else {
            throw UnusableHash(reason: "it is not an Argon2id PHC string")
        }
        guard fields[2] == "v=19" else { throw UnusableHash(reason: "it is not Argon2 version 19") }
        var values: [Substring: UInt32] = [:]
        for pair in fields[3].split(separator: ",", omittingEmptySubsequences: false) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, ["m", "t", "p"].contains(parts[0]), values[parts[0]] == nil,
                  !parts[1].isEmpty, parts[1].utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  let number = UInt32(parts[1]) else {
                throw UnusableHash(reason: "its parameters are malformed")
            }
            values[parts[0]] = number
        }
        guard let memory = values["m"], let iterations = values["t"], let lanes = values["p"] else {
            throw UnusableHash(reason: "its parameters are malformed")
        }
        guard (1...maximumIterations).contains(iterations), (1...maximumParallelism).contains(lanes),
              memory <= maximumMemoryKiB, memory >= 8 * lanes else {
            throw UnusableHash(reason: "its parameters (m=\(memory),t=\(iterations),p=\(lanes)) are out of bounds")
        }
        guard isBase64(fields[4], minimumBytes: 8), isBase64(fields[5], minimumBytes: 4) else {
            throw UnusableHash(reason: "its salt or tag is malformed")
        }
        return Parameters(memoryKiB: memory, iterations: iterations, parallelism: lanes)
    }

    /// Unpadded standard base64 of at least `minimumBytes` bytes.
    private static func isBase64(_ text: Substring, minimumBytes: Int) -> Bool {
        let valid = text.utf8.allSatisfy { byte in
            (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte)
                || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "/")
        }
        return valid && text.utf8.count % 4 != 1 && text.utf8.count * 3 / 4 >= minimumBytes
    }
}
