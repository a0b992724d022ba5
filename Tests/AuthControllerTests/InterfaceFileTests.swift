import AuthController
import Foundation
import Testing

@Suite("D-Bus introspection XML (data/)")
struct InterfaceFileTests {
    let xml: String = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return (try? String(contentsOf: root.appendingPathComponent("data/io.github.authctl.AuthController1.xml"), encoding: .utf8)) ?? ""
    }()

    @Test("names the object path, interface and signal the broadcaster sends")
    func names() {
        #expect(xml.contains(#"<node name="\#(DBusBroadcaster.objectPath)">"#))
        #expect(xml.contains(#"<interface name="\#(DBusBroadcaster.interface)">"#))
        #expect(xml.contains(#"<signal name="\#(DBusBroadcaster.signalName)">"#))
    }

    @Test("declares the signature (sssa{sv}) in argument order")
    func signature() {
        let arguments = xml.components(separatedBy: "<arg ").dropFirst().map { $0.prefix { $0 != ">" } }
        #expect(arguments == [#"name="service" type="s"/"#, #"name="status" type="s"/"#, #"name="user" type="s"/"#,
                              #"name="details" type="a{sv}"/"#])
    }
}
