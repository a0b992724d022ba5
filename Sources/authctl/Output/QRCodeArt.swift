// SPDX-License-Identifier: Apache-2.0
import AuthControllerCore

/// A QR code drawn with text for a terminal: Unicode half blocks (`▀`, `▄`, `█` and space), two
/// rows of modules to a line, with the quiet zone of 4 light modules that readers need around
/// the symbol. Printing the lines is the caller's.
///
/// Cameras read dark modules on a light ground; a terminal may be dark or light. So each line
/// sets its own colours, black ground and bright white text, and draws the light modules and the
/// quiet zone as text (as `qrencode -t ANSIUTF8` does): the code is dark on light whatever the
/// terminal's theme. Without the colours (`colored: false`, for `NO_COLOR`) the light modules
/// are still the text, as with `qrencode -t UTF8`: dark on light on a dark terminal, the common
/// case, and inverted, which many phone cameras also read, on a light one.
enum QRCodeArt {
    /// Light modules around the symbol on each side (the QR code standard's minimum).
    static let quietZone = 4

    /// Black ground, bright white text.
    private static let colors = "\u{1B}[97;40m"
    /// Back to the terminal's own colours, before the line ends, so nothing after it is painted.
    private static let reset = "\u{1B}[0m"

    /// The lines that draw `code`, top to bottom, without line terminators. A symbol of N modules
    /// takes N + 8 columns and (N + 9) / 2 lines; the extra half line below is light.
    static func lines(for code: QRCode, colored: Bool = true) -> [String] {
        let span = -quietZone..<(code.size + quietZone)
        return stride(from: span.lowerBound, to: span.upperBound, by: 2).map { top in
            let cells = span.map { column in
                // The row below the last one is outside the symbol, so light.
                cell(upperLight: !code.isDark(row: top, column: column), lowerLight: !code.isDark(row: top + 1, column: column))
            }
            let text = String(cells)
            return colored ? colors + text + reset : text
        }
    }

    /// One character cell: the text draws the light halves.
    private static func cell(upperLight: Bool, lowerLight: Bool) -> Character {
        switch (upperLight, lowerLight) {
        case (true, true): "█"
        case (true, false): "▀"
        case (false, true): "▄"
        case (false, false): " "
        }
    }
}
