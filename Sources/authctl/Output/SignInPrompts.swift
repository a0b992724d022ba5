// SPDX-License-Identifier: Apache-2.0
import AuthControllerCore
import SystemPackage

/// What the person sees of a sign-in at an OpenID provider on the command line: the
/// authorization URL on stderr and the browser started (`$BROWSER`, else `xdg-open`), or the
/// device code's lines.
struct SignInPrompts: SignInPresenter {
    /// Whether a browser can be shown: `BROWSER` is set, or a graphical session (`DISPLAY`,
    /// `WAYLAND_DISPLAY`) is.
    static var canOpenBrowser: Bool {
        ["BROWSER", "DISPLAY", "WAYLAND_DISPLAY"].contains { ProcessEnvironment.value($0) != nil }
    }

    func showAuthorizationPage(_ url: String) throws(AuthError) {
        // Unwritten, the browser still opens the page: the sign-in goes on.
        try? Output.personal(["To sign in, continue in your browser at \(url)"])
        // The browser is the person's: started, never waited for, its end never looked at.
        let browser = ProcessEnvironment.value("BROWSER") ?? "xdg-open"
        if let failure = DetachedProcess.start([browser, url]) {
            Output.diagnostic("could not start the browser \(browser) (\(failure)); open the URL above yourself")
        }
    }

    func showDeviceCode(_ code: DeviceCode) throws(AuthError) {
        var lines = ["To sign in, open \(code.verificationURI) and enter the code \(code.userCode)"]
        if let complete = code.verificationURIComplete { lines.append("Or open \(complete)") }
        // A phone's camera reads the page from the terminal; a log or a pipe has no use for it.
        if Terminal(descriptor: .standardError).isTerminal, let symbol = try? QRCode(encoding: code.verificationURIComplete ?? code.verificationURI) {
            lines += QRCodeArt.lines(for: symbol, colored: ProcessEnvironment.value("NO_COLOR") == nil)
        }
        // Nobody can sign in with a code nobody saw: waiting for it would only end at --timeout.
        do throws(Output.WriteFailure) {
            try Output.personal(lines)
        } catch {
            throw AuthError.settingsIO("cannot show the sign-in code on standard error (\(error.errno.description)); nothing was stored")
        }
    }
}
