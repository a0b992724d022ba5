// SPDX-License-Identifier: Apache-2.0
/// What git wrote to its helper (`git-credential(1)`, "INPUT/OUTPUT FORMAT"): `key=value` lines
/// up to a blank line or the end of the input; unknown keys are ignored. The command line reads
/// it from standard input; it is parsed here, beside the other tools' readers, so that the
/// parser is checked on its own.
package struct GitCredentialRequest {
    private(set) var values: [String: String] = [:]

    package var host: String? { values["host"] }
    package var username: String? { values["username"] }
    package var password: String? { values["password"] }

    /// `https`, or `http` to a loopback host: a token never travels in the clear off the machine.
    package var isSafeTransport: Bool {
        switch values["protocol"] {
        case "https": return true
        case "http": return host.flatMap { try? ServerURL(validating: "http://\($0)/") }?.isLoopback ?? false
        default: return false
        }
    }

    /// Where the first blank line starts (the request's end), if there is one.
    package static func blankLine(in bytes: [UInt8]) -> Int? {
        if bytes.first == 0x0A { return 0 }
        guard bytes.count >= 2 else { return nil }
        for index in 1..<bytes.count where bytes[index] == 0x0A && bytes[index - 1] == 0x0A { return index }
        return nil
    }

    /// A line without `=`, or a value with a NUL, is refused as git refuses it.
    package init(parsing bytes: [UInt8]) throws(AuthError) {
        for line in bytes.split(separator: 0x0A, omittingEmptySubsequences: false) {
            if line.isEmpty { break }
            guard let equals = line.firstIndex(of: UInt8(ascii: "=")) else {
                throw .invalidInput("git's request has a line without '=': it is not a credential request")
            }
            guard !line.contains(0) else { throw .invalidInput("git's request has a value with a NUL byte") }
            let key = String(decoding: line[..<equals], as: UTF8.self)
            let value = String(decoding: line[(equals + 1)...], as: UTF8.self)
            // A repeated key: the last value, as git reads its own.
            values[key] = value
        }
    }
}
