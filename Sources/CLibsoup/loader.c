// SPDX-License-Identifier: Apache-2.0
#include "shim.h"
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

// The libsoup-3.0 entry points authctl calls, declared here rather than taken from its headers,
// so that nothing links against it (see shim.h). Signatures and the flag value are those of
// libsoup 3 (soup-session.h, soup-message.h, soup-message-headers.h); the soname is stable.
typedef struct _SoupMessageHeaders SoupMessageHeaders;
typedef void (*SoupMessageHeadersForeachFunc)(const char *name, const char *value, gpointer user_data);
enum { SOUP_MESSAGE_NO_REDIRECT = 1 << 1 };
typedef void (*SoupServerCallback)(SoupServer *, SoupServerMessage *, const char *path, GHashTable *query, gpointer);
enum { SOUP_SERVER_LISTEN_IPV4_ONLY = 1 << 1 };
enum { SOUP_MEMORY_COPY = 2 };

static struct {
    SoupSession *(*session_new)(void);
    void (*session_set_timeout)(SoupSession *, guint);
    void (*session_set_proxy_resolver)(SoupSession *, GProxyResolver *);
    SoupMessage *(*message_new)(const char *, const char *);
    const char *(*message_get_method)(SoupMessage *);
    void (*message_add_flags)(SoupMessage *, guint);
    SoupMessageHeaders *(*message_get_request_headers)(SoupMessage *);
    SoupMessageHeaders *(*message_get_response_headers)(SoupMessage *);
    void (*headers_append)(SoupMessageHeaders *, const char *, const char *);
    void (*headers_foreach)(SoupMessageHeaders *, SoupMessageHeadersForeachFunc, gpointer);
    void (*set_request_body_from_bytes)(SoupMessage *, const char *, GBytes *);
    GInputStream *(*session_send)(SoupSession *, SoupMessage *, GCancellable *, GError **);
    guint (*message_get_status)(SoupMessage *);
    GQuark (*session_error_quark)(void);
    GType (*server_get_type)(void);
    void (*server_add_handler)(SoupServer *, const char *, SoupServerCallback, gpointer, GDestroyNotify);
    gboolean (*server_listen_local)(SoupServer *, guint, guint, GError **);
    GSList *(*server_get_uris)(SoupServer *);
    void (*server_disconnect)(SoupServer *);
    const char *(*server_message_get_method)(SoupServerMessage *);
    GUri *(*server_message_get_uri)(SoupServerMessage *);
    void (*server_message_set_status)(SoupServerMessage *, guint, const char *);
    void (*server_message_set_response)(SoupServerMessage *, const char *, int, const char *, gsize);
    SoupMessageHeaders *(*server_message_get_response_headers)(SoupServerMessage *);
    void (*server_message_pause)(SoupServerMessage *);
    void (*server_message_unpause)(SoupServerMessage *);
} soup;

static int loaded = -1;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
    void *library = dlopen("libsoup-3.0.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!library) return;
#define SYMBOL(field, name) if (!(*(void **)&soup.field = dlsym(library, name))) return;
    SYMBOL(session_new, "soup_session_new")
    SYMBOL(session_set_timeout, "soup_session_set_timeout")
    SYMBOL(session_set_proxy_resolver, "soup_session_set_proxy_resolver")
    SYMBOL(message_new, "soup_message_new")
    SYMBOL(message_get_method, "soup_message_get_method")
    SYMBOL(message_add_flags, "soup_message_add_flags")
    SYMBOL(message_get_request_headers, "soup_message_get_request_headers")
    SYMBOL(message_get_response_headers, "soup_message_get_response_headers")
    SYMBOL(headers_append, "soup_message_headers_append")
    SYMBOL(headers_foreach, "soup_message_headers_foreach")
    SYMBOL(set_request_body_from_bytes, "soup_message_set_request_body_from_bytes")
    SYMBOL(session_send, "soup_session_send")
    SYMBOL(message_get_status, "soup_message_get_status")
    SYMBOL(session_error_quark, "soup_session_error_quark")
    SYMBOL(server_get_type, "soup_server_get_type")
    SYMBOL(server_add_handler, "soup_server_add_handler")
    SYMBOL(server_listen_local, "soup_server_listen_local")
    SYMBOL(server_get_uris, "soup_server_get_uris")
    SYMBOL(server_disconnect, "soup_server_disconnect")
    SYMBOL(server_message_get_method, "soup_server_message_get_method")
    SYMBOL(server_message_get_uri, "soup_server_message_get_uri")
    SYMBOL(server_message_set_status, "soup_server_message_set_status")
    SYMBOL(server_message_set_response, "soup_server_message_set_response")
    SYMBOL(server_message_get_response_headers, "soup_server_message_get_response_headers")
    SYMBOL(server_message_pause, "soup_server_message_pause")
    SYMBOL(server_message_unpause, "soup_server_message_unpause")
#undef SYMBOL
    loaded = 0;
}

int authctl_soup_load(void) {
    pthread_once(&once, load);
    return loaded;
}

// libsoup makes the CONNECT tunnel itself, as a message of its own, and when the proxy refuses it
// gives the tunnel's status to the request as though the server had answered. The tunnel's own
// status, kept here as libsoup lets go of it, tells the two apart.
static void on_unqueued(SoupSession *session, SoupMessage *message, gpointer data) {
    (void)session;
    const char *method = soup.message_get_method(message);
    if (method && strcmp(method, "CONNECT") == 0) *(guint *)data = soup.message_get_status(message);
}

// The proxy's Basic authentication goes with the first CONNECT, as curl sends it: libsoup would
// wait for a 407 first, and after it (squid's, with its error page) reuses the connection in a
// state where the TLS handshake that follows reads stray bytes.
static void on_queued(SoupSession *session, SoupMessage *message, gpointer data) {
    (void)session;
    const char *method = soup.message_get_method(message);
    if (method && strcmp(method, "CONNECT") == 0) soup.headers_append(soup.message_get_request_headers(message), "Proxy-Authorization", data);
}

SoupSession *authctl_soup_session_new(guint timeout_seconds, const char *proxy_uri, const char *proxy_authorization, gboolean direct,
                                      guint *tunnel_status) {
    SoupSession *session = soup.session_new();
    soup.session_set_timeout(session, timeout_seconds);
    if (proxy_uri) {
        // GSimpleProxyResolver given a URI GIO cannot read keeps no proxy at all, and so resolves
        // every address to a direct connection: no session rather than that.
        if (!g_uri_is_valid(proxy_uri, G_URI_FLAGS_NONE, NULL)) {
            g_object_unref(session);
            return NULL;
        }
        // Only this proxy: GSimpleProxyResolver answers nothing else, so no direct connection is
        // ever tried when the proxy fails.
        GProxyResolver *resolver = g_simple_proxy_resolver_new(proxy_uri, NULL);
        soup.session_set_proxy_resolver(session, resolver);
        g_object_unref(resolver);
        g_signal_connect(session, "request-unqueued", G_CALLBACK(on_unqueued), tunnel_status);
        if (proxy_authorization) {
            char *header = g_strdup(proxy_authorization);
            g_object_set_data_full(G_OBJECT(session), "authctl-proxy-authorization", header, g_free);
            g_signal_connect(session, "request-queued", G_CALLBACK(on_queued), header);
        }
    } else if (direct) {
        soup.session_set_proxy_resolver(session, NULL);
    } else {
        // The desktop's proxy refuses a tunnel as any proxy does: its status too is kept, so that
        // its 407 is not taken for the server's.
        g_signal_connect(session, "request-unqueued", G_CALLBACK(on_unqueued), tunnel_status);
    }
    return session;
}

SoupMessage *authctl_soup_message_new(const char *method, const char *uri) {
    SoupMessage *message = soup.message_new(method, uri);
    if (message) soup.message_add_flags(message, SOUP_MESSAGE_NO_REDIRECT);
    return message;
}

void authctl_soup_message_append_header(SoupMessage *message, const char *name, const char *value) {
    soup.headers_append(soup.message_get_request_headers(message), name, value);
}

void authctl_soup_message_set_body(SoupMessage *message, const char *content_type, GBytes *body) {
    soup.set_request_body_from_bytes(message, content_type, body);
}

GInputStream *authctl_soup_session_send(SoupSession *session, SoupMessage *message, GCancellable *cancellable, GError **error) {
    return soup.session_send(session, message, cancellable, error);
}

guint authctl_soup_message_status(SoupMessage *message) {
    return soup.message_get_status(message);
}

void authctl_soup_message_each_response_header(SoupMessage *message, void (*each)(const char *, const char *, gpointer), gpointer data) {
    soup.headers_foreach(soup.message_get_response_headers(message), each, data);
}

GQuark authctl_soup_session_error_quark(void) {
    return loaded == 0 ? soup.session_error_quark() : 0;
}

struct handler { AuthctlServerHandler handler; gpointer data; };

static void dispatch(SoupServer *server, SoupServerMessage *message, const char *path, GHashTable *query, gpointer data) {
    (void)server;
    (void)query;
    struct handler *handler = data;
    GUri *uri = soup.server_message_get_uri(message);
    handler->handler(message, soup.server_message_get_method(message), path, uri ? g_uri_get_query(uri) : NULL, handler->data);
}

SoupServer *authctl_soup_server_new_loopback(guint port, AuthctlServerHandler handler, gpointer data, GError **error) {
    // No `Server:` header: the person's browser needs no name of the program that answered.
    SoupServer *server = g_object_new(soup.server_get_type(), "server-header", NULL, NULL);
    struct handler *registered = g_new(struct handler, 1);
    registered->handler = handler;
    registered->data = data;
    soup.server_add_handler(server, NULL, dispatch, registered, g_free);
    if (!soup.server_listen_local(server, port, SOUP_SERVER_LISTEN_IPV4_ONLY, error)) {
        g_object_unref(server);
        return NULL;
    }
    return server;
}

guint authctl_soup_server_port(SoupServer *server) {
    GSList *uris = soup.server_get_uris(server);
    guint port = uris ? (guint)g_uri_get_port(uris->data) : 0;
    g_slist_free_full(uris, (GDestroyNotify)g_uri_unref);
    return port;
}

void authctl_soup_server_close(SoupServer *server) {
    soup.server_disconnect(server);
    g_object_unref(server);
}

void authctl_soup_server_message_respond(SoupServerMessage *message, guint status, const char *content_type, const char *body,
                                         gsize length) {
    soup.server_message_set_status(message, status, NULL);
    SoupMessageHeaders *headers = soup.server_message_get_response_headers(message);
    soup.headers_append(headers, "Cache-Control", "no-store");
    soup.headers_append(headers, "Connection", "close");
    soup.server_message_set_response(message, content_type, SOUP_MEMORY_COPY, body, length);
}

void authctl_soup_server_message_pause(SoupServerMessage *message) { soup.server_message_pause(message); }
void authctl_soup_server_message_unpause(SoupServerMessage *message) { soup.server_message_unpause(message); }

struct finished { void (*finished)(gpointer); gpointer data; gboolean called; };

static void on_finished(SoupServerMessage *message, gpointer data) {
    (void)message;
    struct finished *watch = data;
    if (!watch->called) {
        watch->called = TRUE;
        watch->finished(watch->data);
    }
}

void authctl_soup_server_message_on_finished(SoupServerMessage *message, void (*finished)(gpointer), gpointer data) {
    struct finished *watch = g_new0(struct finished, 1);
    watch->finished = finished;
    watch->data = data;
    g_signal_connect_data(message, "finished", G_CALLBACK(on_finished), watch, (GClosureNotify)(void (*)(void))g_free, 0);
}
