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

    @Test("the config file: one key of one profile set, every other byte kept (comments, CRLF, odd spacing, other sections, a BOM); twice the same")
    func configFile() throws {
        let command = "/usr/bin/authctl --service s aws-credential --role-arn \(Self.role)"
        func edit(_ text: String, profile: String = "dev") throws -> String {
            String(decoding: try AWSConfiguration.edit(Array(text.utf8), setting: "credential_process", to: command, profile: profile, file: "config"),
                   as: UTF8.self)
        }
        let file = "\u{FEFF}# team\r\n[default]\r\nregion = eu-west-1\r\n\r\n[profile   dev]\r\nregion=us-east-1\r\nCredential_Process = old\r\n   --flag\r\ns3 =\r\n  addressing_style = path\r\n; trailing comment\r\n[sso-session dev]\r\nsso_region = x\r\n"
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
    }
}
