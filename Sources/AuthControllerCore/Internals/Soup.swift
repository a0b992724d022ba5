// SPDX-License-Identifier: Apache-2.0
internal import CGLib
internal import CLibsoup

/// One request through libsoup-3.0 (loaded on first use, see `CLibsoup/shim.h`): no redirect
/// followed, TLS verified by GIO against the system store, at most ``maximumAnswerSize`` bytes
/// read, and one ``Deadline`` over the whole exchange. Blocks its thread.
enum Soup {
    /// The corresponding C functions are `soup_session_send` and `g_input_stream_read`.
    static func send(_ request: HTTPRequest, timeout: Double) throws(AuthError) -> HTTPResponse {
        guard authctl_soup_load() == 0 else {
            throw .unavailable("libsoup-3.0 is not installed, and authctl needs it to reach token servers; install the Debian package libsoup-3.0-0")
        }
        // A private main context for this thread: libsoup's sync API runs its I/O there.
        let context = g_main_context_new()
        g_main_context_push_thread_default(context)
        defer {
            g_main_context_pop_thread_default(context)
            g_main_context_unref(context)
        }
        let loopback = (try? ServerURL(validating: request.url))?.isLoopback ?? false
        // Loopback never goes through a proxy; other servers follow the system's proxy settings.
        let session = authctl_soup_session_new(guint(min(timeout.rounded(.up), 86_400)) + 1, loopback ? 1 : 0)!
        defer { authctl_object_unref(UnsafeMutableRawPointer(session)) }
        guard let message = authctl_soup_message_new(request.method, request.url) else {
            throw .invalidInput("libsoup cannot parse the URL \(request.url)")
        }
        defer { authctl_object_unref(UnsafeMutableRawPointer(message)) }
        var contentType: String?
        for (name, value) in request.headers {
            if name.lowercased() == "content-type" { contentType = value } else { authctl_soup_message_append_header(message, name, value) }
        }
        if request.method != "GET" {
            let body = request.body.withUnsafeBytes { g_bytes_new($0.baseAddress, gsize($0.count)) }
            authctl_soup_message_set_body(message, contentType, body)
            g_bytes_unref(body)
        }

        let deadline = Deadline(seconds: timeout)
        // Cancellation handlers touch the request: the deadline is disarmed before it goes.
        defer { deadline.finish() }
        let answer: Result<[UInt8], GLibError>
        do throws(GLibError) {
            let stream = try withGError { authctl_soup_session_send(session, message, deadline.cancellable, $0) }!
            defer {
                deadline.finish()
                g_input_stream_close(stream, nil, nil)
                authctl_object_unref(stream)
            }
            answer = .success(try read(stream, deadline))
        } catch {
            answer = .failure(error)
        }
        let bytes: [UInt8]
        switch answer {
        case .success(let read): bytes = read
        case .failure(let error): throw ErrorMap.authError(error, from: .tokenServer(request.url), while: "ask", deadline: deadline)
        }
        if bytes.count > maximumAnswerSize {
            throw .protocolError("the token server \(request.url) answered with more than 64 KiB")
        }
        final class Headers { var values: [String: String] = [:] }
        let headers = Headers()
        authctl_soup_message_each_response_header(message, { name, value, data in
            guard let name, let value, let data else { return }
            let headers = Unmanaged<Headers>.fromOpaque(data).takeUnretainedValue()
            headers.values[String(cString: name).lowercased()] = String(cString: value)
        }, Unmanaged.passUnretained(headers).toOpaque())
        return HTTPResponse(status: Int(authctl_soup_message_status(message)), headers: headers.values, body: bytes)
    }

    /// The answer's body, up to one byte past the cap (then reading stops).
    private static func read(_ stream: UnsafeMutablePointer<GInputStream>, _ deadline: Deadline) throws(GLibError) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while bytes.count <= maximumAnswerSize {
            let count = try withGError { error in
                chunk.withUnsafeMutableBytes { g_input_stream_read(stream, $0.baseAddress, gsize($0.count), deadline.cancellable, error) }
            }
            if count <= 0 { break }
            bytes.append(contentsOf: chunk[0..<Int(count)])
        }
        return bytes
    }
}

/// The HTTP transport of the command line: libsoup-3.0, which shares GLib's TLS, proxy and
/// error handling with the rest of authctl and, loaded on the first request, costs nothing to
/// the commands that never make one. Each request runs on a thread of its own, off Swift's
/// cooperative pool, so a slow server never holds up other tasks.
package struct SoupTransport: HTTPTransport {
    /// The transport; libsoup-3.0 is loaded only by the first request.
    package init() {}

    /// Sends the request on a thread of its own (`offload`), off the cooperative pool, and
    /// suspends until the answer or the deadline. Without libsoup-3.0 installed this is
    /// ``AuthError/unavailable(_:detail:)-enum.case``. The corresponding C function is
    /// `soup_session_send`.
    package func send(_ request: HTTPRequest, timeout: Duration) async throws(AuthError) -> HTTPResponse {
        let timeout = timeout.seconds
        // Not Dispatch's global queue: it has about one thread per core, so requests that wait
        // for their servers queued behind each other (`serve` refreshing many services at once
        // sent two or three at a time on a two-core machine).
        return try await offload { () throws(AuthError) in try Soup.send(request, timeout: timeout) }
    }
}
