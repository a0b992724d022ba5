// SPDX-License-Identifier: Apache-2.0
@testable import AuthControllerCore
import FoundationEssentials
import Testing

/// What `aws-credential` reads and writes without a network: the role's options, STS's XML
/// answer (hostile ones too), and the AWS config file, edited byte for byte.
@Suite("AWS: roles, STS's answers and the config file")
struct AWSTests {
    static let role = "arn:aws:iam::123456789012:role/developer"
    static let sts = ServerURL(rawValue: "https://sts.amazonaws.com/")!
    /// 2030-03-17T17:46:40Z, in µs.
    static let now: UInt64 = 1_900_000_000_000_000

    static func answer(accessKeyID: String = "ASIAEXAMPLE123456789", expiration: String = "2030-03-17T18:46:40Z",
                       namespace: String = "https://sts.amazonaws.com/doc/2011-06-15/") -> String {
        """
        <?xml version="1.0" encoding="UTF-8"?>
        <AssumeRoleWithWebIdentityResponse xmlns="\(namespace)">
          <AssumeRoleWithWebIdentityResult>
            <SubjectFromWebIdentityToken>sub-ada</SubjectFromWebIdentityToken>
            <Credentials>
              <SessionToken>FwoGZXIvYXdzEBYaDH+/session=token</SessionToken>
              <SecretAccessKey>wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY</SecretAccessKey>
              <Expiration>\(expiration)</Expiration>
              <AccessKeyId>\(accessKeyID)</AccessKeyId>
            </Credentials>
            <Provider>https://id.example.com</Provider>
          </AssumeRoleWithWebIdentityResult>
          <ResponseMetadata><RequestId>ad4156e9-bce1-11e2-82e6-6b6efEXAMPLE</RequestId></ResponseMetadata>
        </AssumeRoleWithWebIdentityResponse>
        """
    }

    private func outcome(_ body: String, status: Int = 200, date: String? = "Sun, 17 Mar 2030 17:46:40 GMT") throws(AuthError) -> STSExchange.Outcome {
        try STSExchange.outcome(of: HTTPResponse(status: status, headers: date.map { ["date": $0] } ?? [:], body: Array(body.utf8)),
                                from: Self.sts, arrivedAt: Self.now)
    }

    @Test("a role: its ARN, duration, session name, region and endpoint checked, 64 for what is not valid")
    func roles() throws {
        let role = try AuthController.AWSRole(arn: Self.role, region: "eu-west-3")
        #expect(role.stsEndpoint.rawValue == "https://sts.eu-west-3.amazonaws.com/")
        #expect(try AuthController.AWSRole(arn: Self.role).stsEndpoint.rawValue == "https://sts.amazonaws.com/")
        #expect(try AuthController.AWSRole(arn: Self.role, region: "eu-west-3", stsEndpoint: "http://127.0.0.1:4566").stsEndpoint.rawValue
                == "http://127.0.0.1:4566/")
        #expect(try AuthController.AWSRole(arn: "arn:aws-cn:iam::123456789012:role/team/ci/deployer").arn.hasSuffix("/deployer"))
        #expect(role.sessionName(for: AccountID(rawValue: "ada lovelace@example.org")!) == "ada-lovelace@example.org")
        #expect(role.sessionName(for: AccountID(rawValue: "é")!) == "--")
        #expect(role.sessionName(for: AccountID(rawValue: String(repeating: "a", count: 100))!).count == 64)
        for arn in ["arn:aws:iam::123456789012:user/ada", "arn:aws:iam::12345678901:role/x", "arn:aws:sts::123456789012:role/x",
                    "arn:aws:iam:us-east-1:123456789012:role/x", "arn:aws:iam::123456789012:role/", "arn:aws:iam::123456789012:role//x",
                    "arn:aws:iam::123456789012:role/x y", "arn:aws:iam::123456789012:role/\u{202E}x", "role/x", ""] {
            #expect(throws: AuthError.self, "\(arn)") { try AuthController.AWSRole(arn: arn) }
        }
        for (duration, name, region, endpoint) in [(899, nil, nil, nil), (43_201, nil, nil, nil), (nil, "a", nil, nil), (nil, "a b", nil, nil),
                                                   (nil, nil, "EU-WEST-1", nil), (nil, nil, "eu.evil.com/", nil),
                                                   (nil, nil, nil, "http://sts.example.com/")] as [(Int?, String?, String?, String?)] {
            #expect {
                try AuthController.AWSRole(arn: Self.role, duration: duration, sessionName: name, region: region, stsEndpoint: endpoint)
            } throws: { ($0 as? AuthError)?.exitCode == 64 }
        }
    }

    @Test("STS's credentials, their expiry made local by STS's Date")
    func credentials() throws {
        // STS's clock ten minutes ahead: its expiry an hour away by its clock is an hour away here.
        guard case .credentials(let credentials) = try outcome(Self.answer(expiration: "2030-03-17T18:56:40Z"),
                                                               date: "Sun, 17 Mar 2030 17:56:40 GMT") else {
            Issue.record("not credentials")
            return
        }
        #expect(credentials.accessKeyID == "ASIAEXAMPLE123456789")
        #expect(credentials.secretAccessKey == "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY")
        #expect(credentials.sessionToken == "FwoGZXIvYXdzEBYaDH+/session=token")
        #expect(Timestamp.microseconds(credentials.expiresAt) == Self.now + 3_600_000_000 - 500_000)
        // Without a Date, STS's clock is taken as the local one.
        guard case .credentials(let undated) = try outcome(Self.answer(expiration: "2030-03-17T18:46:40.123Z"), date: nil) else { return }
        #expect(Timestamp.microseconds(undated.expiresAt) == Self.now + 3_600_123_000)
    }

    @Test("STS's errors: a refused ID token may be refreshed, AccessDenied is 77, others 69, 5xx 69; quoted, without control characters")
    func errors() throws {
        func error(_ code: String, _ message: String = "Token expired", namespace: String = " xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"") -> String {
            "<ErrorResponse\(namespace)><Error><Type>Sender</Type><Code>\(code)</Code><Message>\(message)</Message></Error><RequestId>1</RequestId></ErrorResponse>"
        }
        #expect(try outcome(error("ExpiredTokenException"), status: 400) == .refusedToken("ExpiredTokenException: Token expired"))
        #expect(try outcome(error("InvalidIdentityToken", namespace: ""), status: 400) == .refusedToken("InvalidIdentityToken: Token expired"))
        // A 200 that is an ErrorResponse is an error still.
        #expect(try outcome(error("InvalidIdentityToken")) == .refusedToken("InvalidIdentityToken: Token expired"))
        #expect { try outcome(error("AccessDenied", "Not authorized to perform sts:AssumeRoleWithWebIdentity"), status: 403) } throws: {
            ($0 as? AuthError)?.exitCode == 77 && ($0 as? AuthError)?.message.contains("AccessDenied: Not authorized") == true
        }
        #expect { try outcome(error("RegionDisabledException", "x&#x202E;gpj.exe"), status: 403) } throws: {
            ($0 as? AuthError)?.exitCode == 69 && ($0 as? AuthError)?.message.contains("\u{202E}") == false
        }
        // A control character is not XML at all.
        #expect { try outcome(error("RegionDisabledException", "x&#x1B;[31my"), status: 403) } throws: { ($0 as? AuthError)?.exitCode == 76 }
        #expect { try outcome("<html>Bad gateway</html>", status: 502) } throws: { ($0 as? AuthError)?.exitCode == 69 }
        #expect { try outcome("", status: 302) } throws: { ($0 as? AuthError)?.exitCode == 76 }
    }

    @Test("hostile answers are 76, refused before anything in them is used: an XML bomb, external entities, a DTD, 10 MB, wrong namespaces, missing or doubled fields, an expiry past or unreadable",
          arguments: [
              // Billion laughs.
              "<?xml version=\"1.0\"?><!DOCTYPE lolz [<!ENTITY lol \"lol\"><!ENTITY lol2 \"&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;\">"
                  + (3...9).map { "<!ENTITY lol\($0) \"" + String(repeating: "&lol\($0 - 1);", count: 10) + "\">" }.joined()
                  + "]><AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">&lol9;</AssumeRoleWithWebIdentityResponse>",
              // An external entity, and an external DTD.
              "<?xml version=\"1.0\"?><!DOCTYPE r [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>" + answer(accessKeyID: "&x;").split(separator: "\n").dropFirst().joined(separator: "\n"),
              "<?xml version=\"1.0\"?><!DOCTYPE r SYSTEM \"http://127.0.0.1:9/evil.dtd\">" + answer().split(separator: "\n").dropFirst().joined(separator: "\n"),
              String(repeating: " ", count: 10 * 1024 * 1024) + answer(),
              answer(namespace: "https://sts.amazonaws.com/doc/2099-01-01/"),
              answer().replacing("<AccessKeyId>ASIAEXAMPLE123456789</AccessKeyId>", with: ""),
              answer().replacing("<AccessKeyId>", with: "<AccessKeyId>A</AccessKeyId><AccessKeyId>"),
              answer().replacing("ASIAEXAMPLE123456789", with: "ASIA EXAMPLE"),
              answer(expiration: "2030-03-17T17:40:00Z"),
              answer(expiration: "tomorrow"),
              answer(expiration: "2030-03-17T18:46:40Z").replacing("</AssumeRoleWithWebIdentityResponse>", with: ""),
              "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error><Message>no code</Message></Error></ErrorResponse>",
              "{\"Credentials\":{}}",
              "",
          ])
    func hostile(_ body: String) throws {
        let started = ContinuousClock.now
        #expect { try outcome(body) } throws: { ($0 as? AuthError)?.exitCode == 76 }
        // Bounded: never expanded. (A generous bound for a loaded machine; expansion takes minutes.)
        #expect(ContinuousClock.now - started < .seconds(5))
    }

    @Test("the config file: one key of one profile set, every other byte kept (comments, CRLF, odd spacing, other sections); twice the same; what botocore cannot read refused")
    func configFile() throws {
        let command = "/usr/bin/authctl --service s aws-credential --role-arn \(Self.role)"
        func edit(_ text: String, profile: String = "dev") throws -> String {
            String(decoding: try AWSConfiguration.edit(Array(text.utf8), setting: "credential_process", to: command, profile: profile, file: "config"),
                   as: UTF8.self)
        }
        let file = "# team\r\n[default]\r\nregion = eu-west-1\r\n\r\n[profile   dev]\r\nregion=us-east-1\r\nCredential_Process = old\r\n   --flag\r\ns3 =\r\n  addressing_style = path\r\n; trailing comment\r\n[sso-session dev]\r\nsso_region = x\r\n"
        let edited = try edit(file)
        #expect(edited == file.replacing("Credential_Process = old\r\n   --flag\r\n", with: "credential_process = \(command)\r\n"))
        #expect(try edit(edited) == edited)
        // A section without the key: after its last key, before a trailing comment.
        #expect(try edit("[profile dev]\nregion = x\n\n# next\n[profile other]\n") == "[profile dev]\nregion = x\ncredential_process = \(command)\n\n# next\n[profile other]\n")
        // No section: added at the end, after a blank line, in the file's line ending.
        #expect(try edit("[default]\r\nregion = x") == "[default]\r\nregion = x\r\n\r\n[profile dev]\r\ncredential_process = \(command)\r\n")
        #expect(try edit("", profile: "default") == "[default]\ncredential_process = \(command)\n")
        // A section named like the profile that is another kind is not it.
        #expect(try edit("[sso-session dev]\nx = y\n").hasSuffix("\n\n[profile dev]\ncredential_process = \(command)\n"))
        // Two sections for the profile: the AWS tools refuse the file; so does the set-up.
        #expect(throws: AuthError.self) { try edit("[profile dev]\n[profile  dev]\n") }
        #expect(throws: AuthError.self) { try edit("[profile dev]\n[profile \"dev\"]\n") }
        // A line configparser cannot read: the AWS tools refuse the whole file, and so does the set-up.
        #expect(throws: AuthError.self) { try edit("[profile dev]\nregion b\n") }
        #expect(throws: AuthError.self) { try edit("region = b\n[profile dev]\n") }
        // As configparser reads lines: keys indented under the header are keys; a value goes on
        // over more indented lines, past blank lines and comments; a lone CR ends a line.
        #expect(try edit("[profile dev]\n  region = b\n  credential_process = old\n") == "[profile dev]\n  region = b\n  credential_process = \(command)\n")
        #expect(try edit("[profile dev]\n  region = b\n") == "[profile dev]\n  region = b\n  credential_process = \(command)\n")
        #expect(try edit("[profile dev]\ncredential_process = old\n  --a\n\n# note\n  --b\nregion = c\n") == "[profile dev]\ncredential_process = \(command)\nregion = c\n")
        #expect(try edit("[profile 'dev']\nregion = b\n") == "[profile 'dev']\nregion = b\ncredential_process = \(command)\n")
        #expect(try edit("[profile dev]\rregion = b\r[profile other]\rregion = c\r") == "[profile dev]\rregion = b\rcredential_process = \(command)\r[profile other]\rregion = c\r")
        // Indentation as configparser measures it: any Unicode white space, in characters.
        #expect(try edit("[profile dev]\n\u{0C}region = x\n credential_process = old\n") == "[profile dev]\n\u{0C}region = x\n credential_process = \(command)\n")
        #expect(try edit("[profile dev]\n\u{A0}region = x\n credential_process = old\n") == "[profile dev]\n\u{A0}region = x\n credential_process = \(command)\n")
        #expect(try edit("[profile dev]\nregion = x\n\u{A0}more\n") == "[profile dev]\nregion = x\n\u{A0}more\ncredential_process = \(command)\n")
        // Any header that starts with "profile" and splits into two words is the profile's, as botocore reads it.
        #expect(try edit("[profiles dev]\nregion = x\n") == "[profiles dev]\nregion = x\ncredential_process = \(command)\n")
        #expect(try edit("[profile \"d\\$v\"]\nregion = x\n", profile: "d\\$v").hasSuffix("region = x\ncredential_process = \(command)\n"))
        // What configparser refuses, the set-up refuses (65), changing nothing: a byte-order
        // mark, bytes that are not UTF-8, a section or a key given twice anywhere.
        for unreadable in [Array("\u{FEFF}[default]\nregion = x\n".utf8), Array("[default]\nregion = caf".utf8) + [0xE9, 0x0A],
                           Array("[profile x]\n[profile x]\n".utf8), Array("[default]\nregion = a\nRegion = b\n".utf8)] {
            #expect(throws: AuthError.self) {
                try AWSConfiguration.edit(unreadable, setting: "credential_process", to: command, profile: "dev", file: "config")
            }
        }
        // DEFAULT may come twice: configparser merges it.
        #expect(try edit("[DEFAULT]\na = 1\n[DEFAULT]\nb = 2\n").hasSuffix("[profile dev]\ncredential_process = \(command)\n"))
    }

    @Test("AWS_CONFIG_FILE's variables and ~ expanded as botocore expands them")
    func configPath() {
        let environment = ["HOME": "/home/ada", "AWS": "/etc/aws", "EMPTY": ""]
        func expand(_ path: String) -> String { AWSConfiguration.expandingVariables(path) { environment[$0] } }
        #expect(expand("$AWS/config") == "/etc/aws/config")
        #expect(expand("${AWS}/x${EMPTY}y") == "/etc/aws/xy")
        #expect(expand("$NOPE/$/${}/${AWS") == "$NOPE/$/${}/${AWS")
        #expect(expand("a$$AWS") == "a$/etc/aws")
        #expect(AWSConfiguration.expandingUser("/abs/~x") == "/abs/~x")
        #expect(AWSConfiguration.expandingUser("~no-such-user-here/x") == "~no-such-user-here/x")
        #expect(AWSConfiguration.expandingUser("~root/x") == "/root/x")
    }

    /// `seconds` since the epoch as an HTTP `Date` (IMF-fixdate), by the civil calendar.
    static func imfFixdate(_ seconds: Int) -> String {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400, time = seconds - days * 86_400
        // Howard Hinnant's days_from_civil, inverted.
        let shifted = days + 719_468, era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153, day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9, year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][((days % 7) + 7) % 7]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(weekday), \(two(day)) \(months[month - 1]) \(year) \(two(time / 3600)):\(two(time / 60 % 60)):\(two(time % 60)) GMT"
    }

    @Test("STS's clock however far off; credentials last no longer than asked; an ID token STS echoes is not quoted")
    func clocksAndEchoes() throws {
        let day = 86_400, now = Int(Self.now / 1_000_000)
        func answer(date: Int?, expiration: String, lasting: UInt64 = 43_200) throws(AuthError) -> Date {
            let body = Self.answer(expiration: expiration)
            let headers = date.map { ["date": Self.imfFixdate($0)] } ?? [:]
            guard case .credentials(let credentials) = try STSExchange.outcome(of: HTTPResponse(status: 200, headers: headers, body: Array(body.utf8)),
                                                                              from: Self.sts, arrivedAt: Self.now, lasting: lasting) else {
                throw .protocolError("no credentials")
            }
            return credentials.expiresAt
        }
        for offset in [-11 * 365 * day, 11 * 365 * day] {
            let expiresAt = try answer(date: now + offset, expiration: Timestamp.rfc3339(microseconds: UInt64(now + offset + 3600) * 1_000_000))
            #expect(Int(expiresAt.timeIntervalSince1970.rounded()) == now + 3600, "STS's clock \(offset) s off")
        }
        #expect(Int(try answer(date: nil, expiration: "9999-12-31T23:59:59Z").timeIntervalSince1970.rounded()) == now + 43_200)
        #expect(Int(try answer(date: nil, expiration: "9999-12-31T23:59:59Z", lasting: 900).timeIntervalSince1970.rounded()) == now + 900)

        let idToken = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhZGEiLCJhdWQiOiJhdXRoY3RsIn0.c2lnbmF0dXJlLW9mLXRoZS1wcm92aWRlcg"
        let echo = "<ErrorResponse xmlns=\"\(STSExchange.namespace)\"><Error><Code>ValidationError</Code><Message>bad token \(idToken.prefix(60)) and \(idToken.suffix(40))</Message></Error></ErrorResponse>"
        do {
            _ = try STSExchange.outcome(of: HTTPResponse(status: 400, headers: [:], body: Array(echo.utf8)), from: Self.sts, arrivedAt: Self.now, idToken: idToken)
            Issue.record("an error answer was taken")
        } catch {
            #expect(error.message.contains("bad token …"), "\(error.message)")
            for start in stride(from: 0, through: idToken.utf8.count - 16, by: 1) {
                let piece = String(idToken.utf8.dropFirst(start).prefix(16))!
                #expect(!error.message.contains(piece), "\(error.message)")
            }
        }
    }
}
