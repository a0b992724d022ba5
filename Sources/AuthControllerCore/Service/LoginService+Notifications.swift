// SPDX-License-Identifier: Apache-2.0
// Telling the person on the desktop when a session ends without their asking.
extension LoginService {
    /// The app's name on its notifications, and the desktop entry that names its icon.
    static let notificationAppName = "authctl"
    static let desktopEntry = "io.github.authctl"
    /// How long a call to the notification server may take: one that never answers posts
    /// nothing, and delays nothing else (the calls run on threads of their own).
    static let notificationDeadline = 10.0

    /// Carries out what ``SessionEndNotices`` decided.
    func carryOut(_ steps: [SessionEndNotices.Step], _ state: inout RunState, connection: GDBus.Connection,
                  trigger: AsyncStream<Trigger>.Continuation) {
        guard notifications else { return }
        for step in steps {
            switch step {
            case .post(let notice):
                Task {
                    var id: UInt32?
                    do throws(AuthError) {
                        id = try await offload { () throws(AuthError) -> UInt32 in try Self.post(notice, on: connection) }
                    } catch {
                        self.warn("\(notice.service): \(error.explanation)")
                    }
                    trigger.yield(.noticePosted(notice, id))
                }
            case .close(let id):
                // An error answer (the server closed it already) changes nothing.
                Task {
                    _ = try? await offload { () throws(AuthError) in
                        try? DesktopNotificationCalls.close(connection, id: id, Deadline(seconds: Self.notificationDeadline))
                    }
                }
            case .signIn(let service, let account):
                // Its own executable, whatever has been installed over it since, with serve's
                // environment; a process of its own that opens the browser, never waited for.
                if let problem = DetachedProcess.start(["/proc/self/exe", "--service", service.rawValue, "sign-in", account.rawValue,
                                                        "--flow", "browser"]) {
                    warn("cannot start the sign-in to \(service): \(problem)")
                }
            }
        }
    }

    /// Posts `notice`: its words, with markup escaped where the server reads markup, and the
    /// sign-in as its default action where it offers one. Blocks until the server answers.
    private static func post(_ notice: SessionEndNotices.Notice, on connection: GDBus.Connection) throws(AuthError) -> UInt32 {
        do throws(GLibError) {
            // A server that cannot say what it can do still shows text: without markup, then.
            let capabilities = (try? DesktopNotificationCalls.capabilities(connection, Deadline(seconds: notificationDeadline))) ?? []
            let body = notice.reason == .removed ? "\(notice.account): its keyring item was removed."
                                                 : "\(notice.account): the session has ended. Sign in again to go on."
            return try DesktopNotificationCalls.notify(
                connection, appName: notificationAppName, summary: "Signed out of \(notice.service)",
                body: capabilities.contains("body-markup") ? Markup.escaped(body, quotes: false) : body,
                actions: notice.offersSignIn ? [("default", "Sign in again")] : [], desktopEntry: desktopEntry,
                Deadline(seconds: notificationDeadline))
        } catch {
            throw .unavailable("the desktop's notification server did not take the notice: \(error.message)")
        }
    }
}
