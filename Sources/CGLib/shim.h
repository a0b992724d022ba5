#pragma once
// libsecret (which brings GLib, GObject and GIO) plus a few inline helpers for what
// Swift cannot call directly: C macros and variadic functions.
#include <libsecret/secret.h>
#include <gio/gio.h>
#include <glib.h>
#include <glib-object.h>

/// Replaces `g_hash_table_new(g_str_hash, g_str_equal)` with owned string keys and values,
/// the shape libsecret expects for attribute tables.
static inline GHashTable *authctl_string_table_new(void) {
    return g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
}

/// Replaces `g_hash_table_insert(table, g_strdup(key), g_strdup(value))`.
static inline void authctl_string_table_insert(GHashTable *table, const char *key, const char *value) {
    g_hash_table_insert(table, g_strdup(key), g_strdup(value));
}

/// Replaces `g_hash_table_lookup` for string tables.
static inline const char *authctl_string_table_lookup(GHashTable *table, const char *key) {
    return (const char *)g_hash_table_lookup(table, key);
}

/// Replaces the `G_VARIANT_TYPE("...")` cast macro.
static inline const GVariantType *authctl_variant_type(const char *type_string) {
    return (const GVariantType *)type_string;
}

/// Replaces `G_IS_IO_ERROR` style checks: the quark of GIO's error domain.
static inline GQuark authctl_io_error_quark(void) { return G_IO_ERROR; }
/// The quark of GDBus's error domain (`G_DBUS_ERROR`).
static inline GQuark authctl_dbus_error_quark(void) { return G_DBUS_ERROR; }
/// The quark of libsecret's error domain (`SECRET_ERROR`).
static inline GQuark authctl_secret_error_quark(void) { return SECRET_ERROR; }
/// The quark of GKeyFile's error domain (`G_KEY_FILE_ERROR`).
static inline GQuark authctl_key_file_error_quark(void) { return G_KEY_FILE_ERROR; }

/// Replaces `g_object_unref` for any GObject-derived pointer Swift sees as opaque.
static inline void authctl_object_unref(void *object) { g_object_unref(object); }

/// Replaces the `G_OBJECT(...)` cast.
static inline GObject *authctl_object(void *object) { return (GObject *)object; }

