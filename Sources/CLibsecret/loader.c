// SPDX-License-Identifier: Apache-2.0
#include "shim.h"
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

// The libsecret-1 types and entry points authctl uses, declared here rather than taken from its
// headers, so that nothing links against it (see shim.h). Layouts, flag values and signatures are
// those of libsecret 0.20 (secret-schema.h, secret-types.h, secret-password.h, secret-item.h,
// secret-retrievable.h, secret-service.h, secret-value.h); the soname is stable.
typedef struct { const gchar *name; int type; } SecretSchemaAttribute;
typedef struct {
    const gchar *name;
    int flags;
    SecretSchemaAttribute attributes[32];
    gint reserved;
    gpointer reserved1, reserved2, reserved3, reserved4, reserved5, reserved6, reserved7;
} SecretSchema;
typedef struct _SecretValue SecretValue;
typedef struct _SecretService SecretService;
enum { SECRET_SCHEMA_DONT_MATCH_NAME = 1 << 1 };
enum { SECRET_SEARCH_ALL = 1 << 1 };
enum { SECRET_SERVICE_NONE = 0, SECRET_SERVICE_OPEN_SESSION = 1 << 1 };
enum { SECRET_ITEM_CREATE_NONE = 0 };
enum { SECRET_ITEM_NONE = 0 };

static struct {
    gboolean (*storev_binary_sync)(const SecretSchema *, GHashTable *, const gchar *, const gchar *, SecretValue *,
                                   GCancellable *, GError **);
    GList *(*searchv_sync)(const SecretSchema *, GHashTable *, int, GCancellable *, GError **);
    gboolean (*clearv_sync)(const SecretSchema *, GHashTable *, GCancellable *, GError **);
    GHashTable *(*retrievable_get_attributes)(gpointer);
    gchar *(*retrievable_get_label)(gpointer);
    SecretValue *(*retrievable_retrieve_secret_sync)(gpointer, GCancellable *, GError **);
    GType (*item_get_type)(void);
    gboolean (*item_get_locked)(gpointer);
    gboolean (*item_delete_sync)(gpointer, GCancellable *, GError **);
    gpointer (*item_new_for_dbus_path_sync)(SecretService *, const gchar *, int, GCancellable *, GError **);
    SecretValue *(*value_new)(const gchar *, gssize, const gchar *);
    const gchar *(*value_get)(SecretValue *, gsize *);
    void (*value_unref)(gpointer);
    SecretService *(*service_get_sync)(int, GCancellable *, GError **);
    SecretService *(*service_open_sync)(GType, const gchar *, int, GCancellable *, GError **);
    GType (*service_get_type)(void);
    gint (*service_unlock_dbus_paths_sync)(SecretService *, const gchar **, GCancellable *, gchar ***, GError **);
    gchar *(*service_create_item_dbus_path_sync)(SecretService *, const gchar *, GHashTable *, SecretValue *, int, GCancellable *,
                                                 GError **);
    GQuark (*error_get_quark)(void);
    void (*service_disconnect)(void);
} secret;

static int loaded = -1;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
    void *library = dlopen("libsecret-1.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!library) return;
#define SYMBOL(field, name) if (!(*(void **)&secret.field = dlsym(library, name))) return;
    SYMBOL(storev_binary_sync, "secret_password_storev_binary_sync")
    SYMBOL(searchv_sync, "secret_password_searchv_sync")
    SYMBOL(clearv_sync, "secret_password_clearv_sync")
    SYMBOL(retrievable_get_attributes, "secret_retrievable_get_attributes")
    SYMBOL(retrievable_get_label, "secret_retrievable_get_label")
    SYMBOL(retrievable_retrieve_secret_sync, "secret_retrievable_retrieve_secret_sync")
    SYMBOL(item_get_type, "secret_item_get_type")
    SYMBOL(item_get_locked, "secret_item_get_locked")
    SYMBOL(item_delete_sync, "secret_item_delete_sync")
    SYMBOL(item_new_for_dbus_path_sync, "secret_item_new_for_dbus_path_sync")
    SYMBOL(value_new, "secret_value_new")
    SYMBOL(value_get, "secret_value_get")
    SYMBOL(value_unref, "secret_value_unref")
    SYMBOL(service_get_sync, "secret_service_get_sync")
    SYMBOL(service_open_sync, "secret_service_open_sync")
    SYMBOL(service_get_type, "secret_service_get_type")
    SYMBOL(service_unlock_dbus_paths_sync, "secret_service_unlock_dbus_paths_sync")
    SYMBOL(service_create_item_dbus_path_sync, "secret_service_create_item_dbus_path_sync")
    SYMBOL(error_get_quark, "secret_error_get_quark")
    SYMBOL(service_disconnect, "secret_service_disconnect")
#undef SYMBOL
    loaded = 0;
}

int authctl_secret_load(void) {
    pthread_once(&once, load);
    return loaded;
}

GQuark authctl_secret_error_quark(void) { return loaded == 0 ? secret.error_get_quark() : 0; }

// One schema per kind of item authctl stores; each declares every attribute authctl writes or
// searches by (libsecret refuses an attribute its schema lacks), and none is matched by name:
// items are found by their attributes alone, so an item another tool stored is found too.
#define AUTHCTL_SCHEMA(schema_name) { schema_name, SECRET_SCHEMA_DONT_MATCH_NAME, \
    { { "service", 0 }, { "account", 0 }, { "server", 0 }, { "aws-role", 0 }, { NULL, 0 } }, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL }
static const SecretSchema password_schema = AUTHCTL_SCHEMA("io.github.authctl.Password");
static const SecretSchema tokens_schema = AUTHCTL_SCHEMA("io.github.authctl.Tokens");
static const SecretSchema aws_credentials_schema = AUTHCTL_SCHEMA("io.github.authctl.AWSCredentials");

static const SecretSchema *schema_named(const char *name) {
    if (name && strcmp(name, tokens_schema.name) == 0) return &tokens_schema;
    if (name && strcmp(name, aws_credentials_schema.name) == 0) return &aws_credentials_schema;
    return &password_schema;
}

static GHashTable *attribute_table(const char *const *names, const char *const *values, guint count) {
    GHashTable *table = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    for (guint i = 0; i < count; i++) g_hash_table_insert(table, g_strdup(names[i]), g_strdup(values[i]));
    return table;
}

gboolean authctl_secret_store(const char *schema_name, const char *const *names, const char *const *values, guint count,
                              const char *collection, const char *label, const guint8 *bytes, gsize length,
                              const char *content_type, GCancellable *cancellable, GError **error) {
    GHashTable *attributes = attribute_table(names, values, count);
    SecretValue *value = secret.value_new((const gchar *)bytes, (gssize)length, content_type);
    gboolean stored = secret.storev_binary_sync(schema_named(schema_name), attributes, collection, label, value, cancellable, error);
    secret.value_unref(value);
    g_hash_table_unref(attributes);
    return stored;
}

gchar *authctl_secret_create_item(const char *collection, const char *schema_name, const char *const *names,
                                  const char *const *values, guint count, const char *label, const guint8 *bytes, gsize length,
                                  const char *content_type, GCancellable *cancellable, GError **error) {
    SecretService *service = secret.service_get_sync(SECRET_SERVICE_OPEN_SESSION, cancellable, error);
    if (!service) return NULL;
    GVariantBuilder attributes;
    g_variant_builder_init(&attributes, G_VARIANT_TYPE("a{ss}"));
    for (guint i = 0; i < count; i++) g_variant_builder_add(&attributes, "{ss}", names[i], values[i]);
    g_variant_builder_add(&attributes, "{ss}", "xdg:schema", schema_named(schema_name)->name);
    GHashTable *properties = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, (GDestroyNotify)g_variant_unref);
    g_hash_table_insert(properties, "org.freedesktop.Secret.Item.Label", g_variant_ref_sink(g_variant_new_string(label)));
    g_hash_table_insert(properties, "org.freedesktop.Secret.Item.Attributes", g_variant_ref_sink(g_variant_builder_end(&attributes)));
    SecretValue *value = secret.value_new((const gchar *)bytes, (gssize)length, content_type);
    gchar *path = secret.service_create_item_dbus_path_sync(service, collection, properties, value, SECRET_ITEM_CREATE_NONE,
                                                            cancellable, error);
    secret.value_unref(value);
    g_hash_table_unref(properties);
    g_object_unref(service);
    return path;
}

GList *authctl_secret_search(const char *const *names, const char *const *values, guint count, GCancellable *cancellable,
                             GError **error) {
    GHashTable *attributes = attribute_table(names, values, count);
    GList *items = secret.searchv_sync(&password_schema, attributes, SECRET_SEARCH_ALL, cancellable, error);
    g_hash_table_unref(attributes);
    return items;
}

void authctl_secret_items_free(GList *items) { g_list_free_full(items, g_object_unref); }

void authctl_secret_item_each_attribute(AuthctlSecretItem *item, void (*each)(const char *, const char *, gpointer), gpointer data) {
    GHashTable *attributes = secret.retrievable_get_attributes(item);
    if (!attributes) return;
    GHashTableIter iter;
    gpointer name, value;
    g_hash_table_iter_init(&iter, attributes);
    while (g_hash_table_iter_next(&iter, &name, &value)) each(name, value, data);
    g_hash_table_unref(attributes);
}

gchar *authctl_secret_item_label(AuthctlSecretItem *item) { return secret.retrievable_get_label(item); }

static gboolean is_service_item(AuthctlSecretItem *item) {
    return g_type_check_instance_is_a((GTypeInstance *)item, secret.item_get_type());
}

const char *authctl_secret_item_path(AuthctlSecretItem *item) {
    return is_service_item(item) ? g_dbus_proxy_get_object_path(G_DBUS_PROXY(item)) : NULL;
}

gboolean authctl_secret_item_locked(AuthctlSecretItem *item) {
    return is_service_item(item) ? secret.item_get_locked(item) : FALSE;
}

gboolean authctl_secret_item_secret(AuthctlSecretItem *item, guint8 **bytes, gsize *length, GCancellable *cancellable,
                                    GError **error) {
    SecretValue *value = secret.retrievable_retrieve_secret_sync(item, cancellable, error);
    if (!value) {
        if (error && !*error) g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND, "the item has no secret");
        return FALSE;
    }
    const gchar *data = secret.value_get(value, length);
    *bytes = g_malloc(*length ? *length : 1);
    memcpy(*bytes, data, *length);
    secret.value_unref(value);  // libsecret wipes its copy as it frees it
    return TRUE;
}

gboolean authctl_secret_item_secret_at(const char *path, guint8 **bytes, gsize *length, GCancellable *cancellable, GError **error) {
    // A service object of its own, not the shared default: the items found through that one keep
    // it (an item holds only a weak pointer to its service), and this one's session is new.
    SecretService *service = secret.service_open_sync(secret.service_get_type(), NULL, SECRET_SERVICE_OPEN_SESSION, cancellable, error);
    if (!service) return FALSE;
    gpointer item = secret.item_new_for_dbus_path_sync(service, path, SECRET_ITEM_NONE, cancellable, error);
    gboolean read = item && authctl_secret_item_secret(item, bytes, length, cancellable, error);
    if (item) g_object_unref(item);
    g_object_unref(service);  // only after the read: the item holds a weak pointer to it
    return read;
}

void authctl_secret_wipe_free(guint8 *bytes, gsize length) {
    if (!bytes) return;
    volatile guint8 *wipe = bytes;
    for (gsize i = 0; i < length; i++) wipe[i] = 0;
    g_free(bytes);
}

gboolean authctl_secret_item_delete(AuthctlSecretItem *item, GCancellable *cancellable, GError **error) {
    if (is_service_item(item)) return secret.item_delete_sync(item, cancellable, error);
    // The file keyring deletes by attributes: the whole set names this item (it replaces items
    // whose attributes are the same, so no other item has exactly these).
    GHashTable *attributes = secret.retrievable_get_attributes(item);
    gboolean deleted = secret.clearv_sync(NULL, attributes, cancellable, error);
    g_hash_table_unref(attributes);
    return deleted || (error && !*error);
}

gint authctl_secret_unlock(const char *path, GCancellable *cancellable, GError **error) {
    SecretService *service = secret.service_get_sync(SECRET_SERVICE_NONE, cancellable, error);
    if (!service) return -1;
    const gchar *paths[] = { path, NULL };
    gchar **unlocked = NULL;
    gint count = secret.service_unlock_dbus_paths_sync(service, paths, cancellable, &unlocked, error);
    g_strfreev(unlocked);
    g_object_unref(service);
    return count;
}

void authctl_secret_disconnect(void) { secret.service_disconnect(); }

static gint prompts_shown;
static gsize watching;

static GDBusMessage *count_prompts(GDBusConnection *connection, GDBusMessage *message, gboolean incoming, gpointer data) {
    (void)connection; (void)data;
    if (!incoming && g_dbus_message_get_message_type(message) == G_DBUS_MESSAGE_TYPE_METHOD_CALL
        && g_strcmp0(g_dbus_message_get_interface(message), "org.freedesktop.Secret.Prompt") == 0
        && g_strcmp0(g_dbus_message_get_member(message), "Prompt") == 0)
        g_atomic_int_inc(&prompts_shown);
    return message;
}

void authctl_secret_watch_prompts(GDBusConnection *connection) {
    if (g_once_init_enter(&watching)) {
        g_dbus_connection_add_filter(connection, count_prompts, NULL, NULL);
        g_once_init_leave(&watching, 1);
    }
}

guint authctl_secret_prompts_shown(void) { return (guint)g_atomic_int_get(&prompts_shown); }
