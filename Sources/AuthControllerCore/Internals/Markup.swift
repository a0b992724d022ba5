// SPDX-License-Identifier: Apache-2.0
/// Text for HTML, and for the markup of notification bodies, which is a small part of it; also
/// for XML, such as the sandbox's bus configuration. `package`: the sandbox uses it.
package enum Markup {
    /// `text` with `&`, `<` and `>` as character references, and with `quotes` `"` and `'` too
    /// (needed inside an attribute; a notification server reads only the first three).
    package static func escaped(_ text: String, quotes: Bool) -> String {
        var result = ""
        for character in text {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"" where quotes: result += "&quot;"
            case "'" where quotes: result += "&#39;"
            default: result.append(character)
            }
        }
        return result
    }
}
