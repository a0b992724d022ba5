// SPDX-License-Identifier: Apache-2.0
@testable import AuthControllerCore
import FoundationEssentials

/// What `aws-credential` reads that it does not control: STS's XML answer, and the AWS config
/// file its set-up edits.
enum AWSChecks {
    private static let sts = ServerURL(rawValue: "https://sts.amazonaws.com/")!

    /// STS's answer (the first byte picks the HTTP status): credentials only from a success,
    /// each visible ASCII and expiring after STS's `Date`; anything else a typed error whose
    /// message quotes STS safely.
    @Sendable static func answer(_ input: [UInt8]) throws(PropertyViolation) {
        guard let selector = input.first else { return }
        let status = [200, 400, 403, 500, 302][Int(selector) % 5]
        let response = HTTPResponse(status: status, headers: ["date": "Sun, 17 Mar 2030 17:46:40 GMT"], body: Array(input.dropFirst()))
        let outcome: STSExchange.Outcome
        do {
            outcome = try STSExchange.outcome(of: response, from: sts, arrivedAt: Peer.now)
        } catch {
            try require([64, 69, 76, 77].contains(error.exitCode), "an answer refused with exit \(error.exitCode): \(error.message)")
            try requireQuoted(error, "a refused STS answer")
            return
        }
        switch outcome {
        case .credentials(let credentials):
            try require((200..<300).contains(status), "credentials taken from HTTP \(status)")
            for value in [credentials.accessKeyID, credentials.secretAccessKey, credentials.sessionToken] {
                try require(isVisibleASCII(value), "a credential that is not visible ASCII: \(value.debugDescription)")
            }
            try require(Timestamp.microseconds(credentials.expiresAt) > Peer.now - 1_000_000, "credentials that had expired when they came")
        case .refusedToken(let quoted):
            try require(!quoted.unicodeScalars.contains(where: isControl), "a refusal quoted with a control character")
        }
    }

    /// The config file's edit: the profile's section ends up with one `credential_process`, the
    /// value given; every line of every other section is kept; a second edit changes nothing.
    @Sendable static func configuration(_ input: [UInt8]) throws(PropertyViolation) {
        guard let selector = input.first else { return }
        let profile = ["dev", "default", "a.b-c", "x"][Int(selector) % 4]
        let value = "/usr/bin/authctl --service s aws-credential --role-arn arn:aws:iam::123456789012:role/r"
        let bytes = Array(input.dropFirst())
        let edited: [UInt8]
        do {
            edited = try AWSConfiguration.edit(bytes, setting: "credential_process", to: value, profile: profile, file: "config")
        } catch {
            try require(error.exitCode == 65, "a file refused with exit \(error.exitCode)")
            return
        }
        let again = try? AWSConfiguration.edit(edited, setting: "credential_process", to: value, profile: profile, file: "config")
        try require(again == edited, "a second edit changed the file again")
        let lines = AWSConfiguration.Line.split(edited)
        let parts = AWSConfiguration.Line.read(lines)
        let ours = parts.sections.filter { AWSConfiguration.profileName(ofSection: $0.name) == profile }
        try require(ours.count == 1, "\(ours.count) sections for the profile after the edit")
        let found = parts.options.filter { ours[0].lines.contains($0.lines.lowerBound) && $0.name == "credential_process" }
        try require(found.count == 1 && found[0].lines.count == 1, "the profile's section holds \(found.count) credential_process keys, or one that goes on over lines")
        let line = String(decoding: lines[found[0].lines.lowerBound].content, as: UTF8.self)
        try require(line.hasSuffix("credential_process = \(value)"), "the key's line is \(line.debugDescription)")
        // Every line outside the profile's section is kept, in order (a new section comes after
        // a blank line of its own).
        // The section reaches to the next header: the comments and blank lines at its end are its.
        func outside(_ lines: [AWSConfiguration.Line]) -> [[UInt8]] {
            let sections = AWSConfiguration.Line.read(lines).sections
            let excluded = sections.indices.filter { AWSConfiguration.profileName(ofSection: sections[$0].name) == profile }.map { index in
                sections[index].lines.lowerBound..<(index + 1 < sections.count ? sections[index + 1].lines.lowerBound : lines.count)
            }
            var kept = lines.indices.filter { index in !excluded.contains { $0.contains(index) } }.map { lines[$0].content }
            while kept.last?.isEmpty == true { kept.removeLast() }
            return kept
        }
        try require(outside(lines) == outside(AWSConfiguration.Line.split(bytes)), "a line outside the profile's section changed")
    }
}
