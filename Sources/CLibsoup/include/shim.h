// SPDX-License-Identifier: Apache-2.0
#pragma once
// libsoup-3.0, the HTTP client authctl uses to reach token servers, loaded with dlopen on the
// first request: a library linked into the binary is loaded by every command at start-up, and
// most commands (status, a cached token) never touch the network. GLib and GIO come linked
// through CGLib. The few soup_* entry points are declared in loader.c, so that building
// needs no libsoup headers; running a network command needs the runtime package libsoup-3.0-0.
#include <gio/gio.h>
#include <string.h>

typedef struct _SoupSession SoupSession;
typedef struct _SoupMessage SoupMessage;

/// Loads libsoup-3.0.so.0 and its symbols once (thread-safe). 0 on success; -1 when the
/// library or a symbol is missing.
int authctl_soup_load(void);

/// `soup_session_new` with `soup_session_set_timeout` (a per-step backstop; the deadline is a
/// GCancellable) and its proxy: `proxy_uri` alone (a `GSimpleProxyResolver`), else with
/// `direct` none (`soup_session_set_proxy_resolver(NULL)`), else the desktop's (GIO's default
/// resolver). Through a proxy (the desktop's too), the status of the last `CONNECT` is written to `tunnel_status`,
/// which must outlive the session, and `proxy_authorization` (when not NULL) is sent with each
/// `CONNECT` as its `Proxy-Authorization` header. NULL when GIO cannot read `proxy_uri` (its
/// resolver would then answer every address with a direct connection).
SoupSession *authctl_soup_session_new(guint timeout_seconds, const char *proxy_uri, const char *proxy_authorization, gboolean direct,
                                      guint *tunnel_status);

/// The proxy GIO's default resolver (the desktop's setting) gives for `uri`, as a newly
/// allocated URI (free with `g_free`); NULL for a direct connection or when it cannot say.
static inline char *authctl_desktop_proxy(const char *uri) {
    gchar **proxies = g_proxy_resolver_lookup(g_proxy_resolver_get_default(), uri, NULL, NULL);
    char *first = (proxies && proxies[0] && strcmp(proxies[0], "direct://") != 0) ? g_strdup(proxies[0]) : NULL;
    g_strfreev(proxies);
    return first;
}

/// `soup_message_new(method, uri)` with `SOUP_MESSAGE_NO_REDIRECT`: a 3xx is the answer.
/// NULL when libsoup cannot parse the URI.
SoupMessage *authctl_soup_message_new(const char *method, const char *uri);

/// `soup_message_headers_append` on the request headers.
void authctl_soup_message_append_header(SoupMessage *message, const char *name, const char *value);

/// `soup_message_set_request_body_from_bytes`.
void authctl_soup_message_set_body(SoupMessage *message, const char *content_type, GBytes *body);

/// `soup_session_send`: sends and returns the answer's body stream (headers are then in).
GInputStream *authctl_soup_session_send(SoupSession *session, SoupMessage *message, GCancellable *cancellable, GError **error);

/// `soup_message_get_status`.
guint authctl_soup_message_status(SoupMessage *message);

/// `soup_message_headers_foreach` on the response headers.
void authctl_soup_message_each_response_header(SoupMessage *message, void (*each)(const char *name, const char *value, gpointer data),
                                               gpointer data);

typedef struct _SoupServer SoupServer;
typedef struct _SoupServerMessage SoupServerMessage;

/// A request to an `authctl_soup_server`: its method, path and raw query (NULL without one).
typedef void (*AuthctlServerHandler)(SoupServerMessage *message, const char *method, const char *path, const char *query,
                                     gpointer data);

/// A `SoupServer` that answers every request through `handler`, listening on 127.0.0.1 only
/// (`soup_server_listen_local` with `SOUP_SERVER_LISTEN_IPV4_ONLY`) at `port` (0: one the system
/// picks), its sources on the thread-default main context. NULL with `error` set when it cannot
/// listen.
SoupServer *authctl_soup_server_new_loopback(guint port, AuthctlServerHandler handler, gpointer data, GError **error);

/// The port the server listens on; 0 when unknown.
guint authctl_soup_server_port(SoupServer *server);

/// Stops listening and closes every connection (`soup_server_disconnect`), then drops the server.
void authctl_soup_server_close(SoupServer *server);

/// `soup_server_message_set_status` and `soup_server_message_set_response` (copied), with the
/// headers `Cache-Control: no-store` and `Connection: close`.
void authctl_soup_server_message_respond(SoupServerMessage *message, guint status, const char *content_type, const char *body,
                                         gsize length);

/// `soup_server_message_pause` / `soup_server_message_unpause`: an answer given later.
void authctl_soup_server_message_pause(SoupServerMessage *message);
void authctl_soup_server_message_unpause(SoupServerMessage *message);

/// Calls `finished` once the answer to `message` is written (its `finished` signal), or the
/// connection is gone.
void authctl_soup_server_message_on_finished(SoupServerMessage *message, void (*finished)(gpointer), gpointer data);

/// The quark of libsoup's session errors (`SOUP_SESSION_ERROR`: an answer that is not HTTP).
GQuark authctl_soup_session_error_quark(void);

/// The quarks of GIO's TLS and resolver errors (`G_TLS_ERROR`, `G_RESOLVER_ERROR`).
static inline GQuark authctl_tls_error_quark(void) { return G_TLS_ERROR; }
static inline GQuark authctl_resolver_error_quark(void) { return G_RESOLVER_ERROR; }
