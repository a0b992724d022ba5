#pragma once
// libsoup-3.0, the HTTP client authctl uses to reach token servers, loaded with dlopen on the
// first request: a library linked into the binary is loaded by every command at start-up, and
// most commands (status, a cached token) never touch the network. GLib and GIO come linked
// through CGLib. The few soup_* entry points are declared in loader.c, so that building
// needs no libsoup headers; running a network command needs the runtime package libsoup-3.0-0.
#include <gio/gio.h>

typedef struct _SoupSession SoupSession;
typedef struct _SoupMessage SoupMessage;

/// Loads libsoup-3.0.so.0 and its symbols once (thread-safe). 0 on success; -1 when the
/// library or a symbol is missing.
int authctl_soup_load(void);

/// `soup_session_new` with `soup_session_set_timeout` (a per-step backstop; the deadline is a
/// GCancellable) and, with `direct`, no proxy (`soup_session_set_proxy_resolver(NULL)`).
SoupSession *authctl_soup_session_new(guint timeout_seconds, gboolean direct);

/// `soup_message_new("POST", uri)` with `SOUP_MESSAGE_NO_REDIRECT`: a 3xx is the answer.
/// NULL when libsoup cannot parse the URI.
SoupMessage *authctl_soup_message_new_post(const char *uri);

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

/// The quark of libsoup's session errors (`SOUP_SESSION_ERROR`: an answer that is not HTTP).
GQuark authctl_soup_session_error_quark(void);

/// The quarks of GIO's TLS and resolver errors (`G_TLS_ERROR`, `G_RESOLVER_ERROR`).
static inline GQuark authctl_tls_error_quark(void) { return G_TLS_ERROR; }
static inline GQuark authctl_resolver_error_quark(void) { return G_RESOLVER_ERROR; }
