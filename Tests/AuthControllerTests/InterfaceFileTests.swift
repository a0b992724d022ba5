// SPDX-License-Identifier: Apache-2.0
import AuthController
import Foundation
import Testing

@Suite("D-Bus introspection XML (data/)")
struct InterfaceFileTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    let xml: String = {
        (try? String(contentsOf: root.appendingPathComponent("data/io.github.authctl.AuthController1.xml"), encoding: .utf8)) ?? ""
    }()

    /// The text of every `<!-- … -->` comment of the AuthController1 file.
    var comments: String {
        xml.components(separatedBy: "<!--").dropFirst().map { $0.components(separatedBy: "-->")[0] }.joined(separator: "\n")
    }

    @Test("names the object path, interface and signal the broadcaster sends")
    func names() {
        #expect(xml.contains(#"<node name="\#(DBusBroadcaster.objectPath)">"#))
        #expect(xml.contains(#"<interface name="\#(DBusBroadcaster.interface)">"#))
        #expect(xml.contains(#"<signal name="\#(DBusBroadcaster.signalName)">"#))
    }

    @Test("declares the signal's signature (sssa{sv}) in argument order")
    func signature() throws {
        let signal = try #require(xml.components(separatedBy: #"<signal name="\#(DBusBroadcaster.signalName)">"#).dropFirst().first?
            .components(separatedBy: "</signal>").first)
        let arguments = signal.components(separatedBy: "<arg ").dropFirst().map { $0.prefix { $0 != ">" } }
        #expect(arguments == [#"name="service" type="s"/"#, #"name="status" type="s"/"#, #"name="user" type="s"/"#,
                              #"name="details" type="a{sv}"/"#])
    }

    /// Every reason a listener can receive; `initial` is what `watch --initial` prints, never sent.
    static let broadcastReasons: [LoginEvent.Reason] = {
        let all: [LoginEvent.Reason] = [.signIn, .signOut, .switch, .forget, .expired, .removed, .initial]
        // Exhaustive on purpose: a new reason does not compile until it is listed above.
        return all.filter { reason in
            switch reason {
            case .signIn, .signOut, .switch, .forget, .expired, .removed: true
            case .initial: false
            }
        }
    }()

    @Test("the comments list every reason that is broadcast, expired and removed included", arguments: broadcastReasons)
    func reasonListed(_ reason: LoginEvent.Reason) {
        // The list in LoginStatusChanged's comment: one reason at the start of a line, then its meaning.
        let listed = comments.split(separator: "\n").contains { line in
            line.drop { $0 == " " }.hasPrefix(reason.rawValue + " ")
        }
        #expect(listed, "data/io.github.authctl.AuthController1.xml: the comment of LoginStatusChanged does not list reason \(reason.rawValue)")
    }

    /// One D-Bus error per family of exit codes (the README's table of exit codes, and
    /// `authctl.serve(1)`).
    static let errorNames = ["NotSignedIn", "InvalidInput", "Unavailable", "Timeout", "Denied", "Protocol", "SettingsUnsafe", "SettingsIO"]
        .map { "io.github.authctl.Error." + $0 }

    @Test("the comments name every D-Bus error serve answers with, one per family of exit codes", arguments: errorNames)
    func errorListed(_ name: String) {
        let listed = comments.split(separator: "\n").contains { line in
            line.split(separator: " ").contains { $0 == name }
        }
        #expect(listed, "data/io.github.authctl.AuthController1.xml: the comments do not name \(name)")
    }
}
