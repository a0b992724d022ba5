// SPDX-License-Identifier: Apache-2.0
import AuthControllerCore
@testable import authctl
import Foundation
import Subprocess
import Testing

/// The QR code of the device flow, as a phone reads it: encoded by libqrencode, drawn as text,
/// the text turned back into an image, and the image decoded by zbarimg (Debian package
/// zbar-tools).
@Suite struct QRCodeTests {
    static let addresses = [
        "https://login.example.com/device",
        // Query characters: ? & = % + # and a user code.
        "https://login.example.com/activate?user_code=WDJB-MJHT&client=authctl%20cli&lang=en+GB#top",
        // About 300 bytes: a complete verification URI with a long query.
        "https://login.example.com/oauth2/v2.0/device/verify?user_code=WDJB-MJHT&session="
            + String(repeating: "Zm9vYmFyYmF6cXV4", count: 12) + "&state=" + String(repeating: "0123456789", count: 2),
    ]

    @Test(arguments: addresses)
    func drawnCodeReadsBack(address: String) async throws {
        let code = try QRCode(encoding: address)
        let read = try await Self.decode(Self.modules(of: QRCodeArt.lines(for: code)))
        #expect(read == address)
    }

    @Test func uncoloredLinesAreTheSameDrawing() throws {
        let code = try QRCode(encoding: Self.addresses[0])
        let colored = QRCodeArt.lines(for: code).map { $0.replacing(/\x{1B}\[[0-9;]*m/, with: "") }
        #expect(QRCodeArt.lines(for: code, colored: false) == colored)
    }

    @Test func longAddressIsAbout300Bytes() {
        #expect((290...320).contains(Self.addresses[2].utf8.count))
    }

    @Test func drawingHasTheQuietZoneLight() throws {
        let code = try QRCode(encoding: Self.addresses[0])
        let modules = Self.modules(of: QRCodeArt.lines(for: code))
        let border = modules.prefix(4) + modules.suffix(4) + modules.map { Array($0.prefix(4) + $0.suffix(4)) }
        #expect(border.allSatisfy { row in !row.contains(true) })
    }

    @Test func drawingIsTheSymbolInside() throws {
        let code = try QRCode(encoding: Self.addresses[0])
        let modules = Self.modules(of: QRCodeArt.lines(for: code))
        let symbol = (0..<code.size).map { row in (0..<code.size).map { column in code.isDark(row: row, column: column) } }
        #expect(modules.dropFirst(4).prefix(code.size).map { Array($0.dropFirst(4).prefix(code.size)) } == symbol)
    }

    @Test func drawingTakesTwoRowsALine() throws {
        let code = try QRCode(encoding: Self.addresses[0])
        #expect(QRCodeArt.lines(for: code).count == (code.size + 9) / 2)
    }

    @Test func coloredLinesSetTheirColors() throws {
        let code = try QRCode(encoding: Self.addresses[0])
        #expect(QRCodeArt.lines(for: code).allSatisfy { $0.hasPrefix("\u{1B}[97;40m") })
    }

    @Test func coloredLinesResetTheColorsBeforeTheyEnd() throws {
        let code = try QRCode(encoding: Self.addresses[0])
        #expect(QRCodeArt.lines(for: code).allSatisfy { $0.hasSuffix("\u{1B}[0m") })
    }

    @Test func shortAddressIsASmallSymbol() throws {
        // Level L: 32 bytes fit version 2 (25 modules); level M would need version 3.
        #expect(try QRCode(encoding: Self.addresses[0]).size == 25)
    }

    @Test func missingLibraryIsUnavailable() {
        #expect(throws: AuthError.unavailable("libqrencode is not installed, and authctl needs it to draw the QR code; install the Debian package libqrencode4")) {
            try QRCode(encoding: Self.addresses[0], libraryName: "libqrencode.so.0-missing")
        }
    }

    @Test func textTooLongIsInvalidInput() {
        #expect(throws: AuthError.invalidInput("the text is too long for a QR code: 3000 bytes, and one holds at most 2953")) {
            try QRCode(encoding: String(repeating: "a", count: 3000))
        }
    }

    @Test func emptyTextIsInvalidInput() {
        #expect(throws: AuthError.invalidInput("a QR code needs a text without NUL characters, and this one is empty or has one")) {
            try QRCode(encoding: "")
        }
    }

    /// The modules a camera sees in `lines`, row by row, `true` for dark: the text draws the light
    /// halves (on the black ground the colours set, or on a dark terminal's).
    static func modules(of lines: [String]) -> [[Bool]] {
        lines.flatMap { line in
            let cells = line.replacing(/\x{1B}\[[0-9;]*m/, with: "")
            let upper = cells.map { $0 == "█" || $0 == "▀" }
            let lower = cells.map { $0 == "█" || $0 == "▄" }
            return [upper.map { !$0 }, lower.map { !$0 }]
        }
    }

    /// What zbarimg reads in `modules`, drawn 4 pixels a module as a plain PBM image.
    static func decode(_ modules: [[Bool]]) async throws -> String? {
        let scale = 4
        let width = (modules.first?.count ?? 0) * scale
        var image = "P1\n\(width) \(modules.count * scale)\n"
        for row in modules {
            let pixels = row.flatMap { Array(repeating: $0 ? "1" : "0", count: scale) }.joined(separator: " ")
            image += String(repeating: pixels + "\n", count: scale)
        }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("authctl-qr-\(UUID().uuidString).pbm").path
        try image.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            let result = try await run(.name("zbarimg"), arguments: ["--quiet", "--raw", path],
                                       output: .string(limit: 65_536), error: .string(limit: 65_536))
            #expect(result.terminationStatus.isSuccess, "zbarimg: \(result.standardError)")
            let output = result.standardOutput
            return output.hasSuffix("\n") ? String(output.dropLast()) : output
        } catch let error as SubprocessError where error.code == .executableNotFound {
            Issue.record("zbarimg is not installed: install the Debian package zbar-tools (.ci/install-deps)")
            return nil
        }
    }
}
