// SPDX-License-Identifier: Apache-2.0
internal import CGLib
internal import CLibsoup

/// One request through libsoup-3.0 (loaded on first use, see `CLibsoup/shim.h`): no redirect
/// followed, TLS verified by GIO against the system store, at most ``maximumAnswerSize`` bytes
/// read, and one ``Deadline`` over the whole exchange. Blocks its thread.
enum Soup {
    /// The corresponding C functions are `soup_session_send` and `g_input_stream_read`.
    static func send(_ request: HTTPRequest, timeout: Double, proxies: ProxyVariables) throws(AuthError) -> HTTPResponse {
        guard authctl_soup_load() == 0 else {
            throw .unavailable("libsoup-3.0 is not installed, and authctl needs it to reach token servers; install the Debian package libsoup-3.0-0")
        }
        // Decided here, as the request goes: a command that sends none never reads the variables.
        let route = try ProxyRoute.of(request.url, under: proxies)
        // A private main context for this thread: libsoup's sync API runs its I/O there.
        let context = g_main_context_new()
        g_main_context_push_thread_default(context)
        defer {
            g_main_context_pop_thread_default(context)
            g_main_context_unref(context)
        }
        let tunnelStatus = UnsafeMutablePointer<guint>.allocate(capacity: 1)
        tunnelStatus.initialize(to: 0)
        defer { tunnelStatus.deallocate() }
        let backstop = guint(min(timeout.rounded(.up), 86_400)) + 1
        let session: OpaquePointer
        switch route {
        case .direct: session = authctl_soup_session_new(backstop, nil, nil, 1, tunnelStatus)!
        case .desktop: session = authctl_soup_session_new(backstop, nil, nil, 0, tunnelStatus)!
        case .proxy(let proxy):
            guard let made = authctl_soup_session_new(backstop, proxy.uri, proxy.basicAuthorization, 0, tunnelStatus) else {
                // Never direct instead.
                throw .usage("\(proxy.variable) is not a proxy authctl can use: GIO cannot read \(proxy.name) as a proxy's address; give it as http://HOST:PORT")
            }
            session = made
        }
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
        if tunnelStatus.pointee != 0, !(200...299).contains(tunnelStatus.pointee) {
            switch route {
            case .proxy(let proxy): throw proxyRefusal(proxy, status: Int(tunnelStatus.pointee), server: request.url)
            case .desktop: throw desktopProxyRefusal(status: Int(tunnelStatus.pointee), server: request.url)
            case .direct: break
            }
        }
        let bytes: [UInt8]
        switch answer {
        case .success(let read): bytes = read
        case .failure(let error):
            if case .proxy(let proxy) = route, tunnelStatus.pointee == 0 {
                throw ErrorMap.proxyError(error, proxy: proxy, server: request.url, deadline: deadline)
            }
            throw ErrorMap.authError(error, from: .tokenServer(route.naming(request.url)), while: "ask", deadline: deadline)
        }
        if bytes.count > maximumAnswerSize {
            throw .protocolError("the token server \(route.naming(request.url)) answered with more than 64 KiB")
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

    /// A proxy that would not open the tunnel: 407 asks for (or refused) the user and password
    /// of the variable it came from; any other status is named.
    private static func proxyRefusal(_ proxy: HTTPProxy, status: Int, server: String) -> AuthError {
        if status == 407 {
            if proxy.user == nil {
                return .unavailable("the proxy \(proxy.name) asks for a user and password: put them in \(proxy.variable) (http://USER:PASSWORD@\(proxy.name))")
            }
            return .unavailable("the proxy \(proxy.name) refused the user and password in \(proxy.variable)")
        }
        return .unavailable("the proxy \(proxy.name) refused the tunnel to \(server) (HTTP \(status)); check \(proxy.variable) and no_proxy, or ask whoever runs the proxy")
    }

    /// The desktop's proxy would not open the tunnel: named as `server show` names it, and what
    /// to fix said (a 407 is the proxy's, not the server's).
    private static func desktopProxyRefusal(status: Int, server: String) -> AuthError {
        let name = desktopProxy(for: server).map { "the desktop's proxy \($0)" } ?? "the desktop's proxy"
        if status == 407 {
            return .unavailable("\(name) asks for a user and password: set them in the desktop's network proxy settings, or name the proxy in https_proxy (http://USER:PASSWORD@HOST:PORT)")
        }
        return .unavailable("\(name) refused the tunnel to \(server) (HTTP \(status)); check the desktop's network proxy settings, or set https_proxy and no_proxy")
    }

    /// The proxy the desktop's setting gives for `url` (GIO's default resolver), as `HOST:PORT`;
    /// `nil` for a direct connection. Only `server show` asks: a request lets libsoup ask.
    /// The corresponding C function is `g_proxy_resolver_lookup`.
    static func desktopProxy(for url: String) -> String? {
        guard let uri = authctl_desktop_proxy(url) else { return nil }
        defer { g_free(uri) }
        let text = String(cString: uri)
        guard let proxy = try? HTTPProxy(parsing: text, from: "the desktop's proxy setting") else {
            // Not an http proxy (SOCKS, say): named by what follows the scheme, without credentials.
            return text.split(separator: "@").last.map { String($0.split(separator: "/").last ?? $0) } ?? text
        }
        return proxy.name
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
    /// The transport, through the proxies `proxies` name (this process's variables by default);
    /// libsoup-3.0 is loaded only by the first request.
    package init(proxies: ProxyVariables = .current) {
        self.proxies = proxies
    }

    /// The proxy variables requests follow (read when each is sent).
    package let proxies: ProxyVariables

    /// Sends the request on a thread of its own (`offload`), off the cooperative pool, and
    /// suspends until the answer or the deadline. Without libsoup-3.0 installed this is
    /// ``AuthError/unavailable(_:detail:)-enum.case``. The corresponding C function is
    /// `soup_session_send`.
    package func send(_ request: HTTPRequest, timeout: Duration) async throws(AuthError) -> HTTPResponse {
        let timeout = timeout.seconds
        // Not Dispatch's global queue: it has about one thread per core, so requests that wait
        // for their servers queued behind each other (`serve` refreshing many services at once
        // sent two or three at a time on a two-core machine).
        return try await offload { [proxies] () throws(AuthError) in try Soup.send(request, timeout: timeout, proxies: proxies) }
    }
}

extension ProxyRoute {
    /// A server's URL as messages name it: with the proxy it is reached through.
    func naming(_ url: String) -> String {
        if case .proxy(let proxy) = self { return "\(url) (through the proxy \(proxy.name))" }
        return url
    }

    /// `HOST:PORT` of the proxy a request to `url` goes through, or `nil` for a direct
    /// connection: what `server show` prints.
    package static func proxyName(for url: String, under variables: ProxyVariables) throws(AuthError) -> String? {
        switch try of(url, under: variables) {
        case .direct: return nil
        case .proxy(let proxy): return proxy.name
        case .desktop: return Soup.desktopProxy(for: url)
        }
    }
}
