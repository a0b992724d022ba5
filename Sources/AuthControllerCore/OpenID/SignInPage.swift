// SPDX-License-Identifier: Apache-2.0
/// The page the browser shows once the provider sent the person back to authctl: the truth
/// about the sign-in, in words a person reads, with nothing from the provider that is not escaped.
enum SignInPage {
    /// A complete HTML page titled `title`, saying `text`.
    static func page(title: String, text: String) -> String {
        """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
        <title>\(escaped(title))</title>
        <style>body{font-family:system-ui,sans-serif;max-width:36em;margin:4em auto;padding:0 1em;line-height:1.5}</style>
        </head><body><h1>\(escaped(title))</h1><p>\(escaped(text))</p></body></html>

        """
    }

    /// The page of a sign-in that is complete: tokens stored, event emitted.
    static func signedIn(service: ServiceName, account: AccountID) -> String {
        page(title: "Signed in to \(service) as \(account)", text: "You can close this page and go back to the terminal.")
    }

    /// The page of a sign-in that failed, saying why.
    static func failed(_ error: AuthError) -> String {
        page(title: "The sign-in did not complete", text: error.message + ". Nothing was stored. You can close this page.")
    }

    /// `text` with HTML's special characters as character references.
    static func escaped(_ text: String) -> String {
        Markup.escaped(text, quotes: true)
    }
}
