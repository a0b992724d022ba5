#include "shim.h"
#include <dlfcn.h>
#include <pthread.h>

// The libsoup-3.0 entry points authctl calls, declared here rather than taken from its headers,
// so that nothing links against it (see shim.h). Signatures and the flag value are those of
// libsoup 3 (soup-session.h, soup-message.h, soup-message-headers.h); the soname is stable.
typedef struct _SoupMessageHeaders SoupMessageHeaders;
typedef void (*SoupMessageHeadersForeachFunc)(const char *name, const char *value, gpointer user_data);
enum { SOUP_MESSAGE_NO_REDIRECT = 1 << 1 };

static struct {
    SoupSession *(*session_new)(void);
    void (*session_set_timeout)(SoupSession *, guint);
    void (*session_set_proxy_resolver)(SoupSession *, GProxyResolver *);
    SoupMessage *(*message_new)(const char *, const char *);
    void (*message_add_flags)(SoupMessage *, guint);
    SoupMessageHeaders *(*message_get_request_headers)(SoupMessage *);
    SoupMessageHeaders *(*message_get_response_headers)(SoupMessage *);
    void (*headers_append)(SoupMessageHeaders *, const char *, const char *);
    void (*headers_foreach)(SoupMessageHeaders *, SoupMessageHeadersForeachFunc, gpointer);
    void (*set_request_body_from_bytes)(SoupMessage *, const char *, GBytes *);
    GInputStream *(*session_send)(SoupSession *, SoupMessage *, GCancellable *, GError **);
    guint (*message_get_status)(SoupMessage *);
    GQuark (*session_error_quark)(void);
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
    SYMBOL(message_add_flags, "soup_message_add_flags")
    SYMBOL(message_get_request_headers, "soup_message_get_request_headers")
    SYMBOL(message_get_response_headers, "soup_message_get_response_headers")
    SYMBOL(headers_append, "soup_message_headers_append")
    SYMBOL(headers_foreach, "soup_message_headers_foreach")
    SYMBOL(set_request_body_from_bytes, "soup_message_set_request_body_from_bytes")
    SYMBOL(session_send, "soup_session_send")
    SYMBOL(message_get_status, "soup_message_get_status")
    SYMBOL(session_error_quark, "soup_session_error_quark")
#undef SYMBOL
    loaded = 0;
}

int authctl_soup_load(void) {
    pthread_once(&once, load);
    return loaded;
}

SoupSession *authctl_soup_session_new(guint timeout_seconds, gboolean direct) {
    SoupSession *session = soup.session_new();
    soup.session_set_timeout(session, timeout_seconds);
    if (direct) soup.session_set_proxy_resolver(session, NULL);
    return session;
}

SoupMessage *authctl_soup_message_new_post(const char *uri) {
    SoupMessage *message = soup.message_new("POST", uri);
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
