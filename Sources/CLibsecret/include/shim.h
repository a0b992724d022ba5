// SPDX-License-Identifier: Apache-2.0
#pragma once
// libsecret-1, the Secret Service client every GNOME program and every Secret Service
// implementation is tested with: authctl stores, deletes and unlocks through it, so its prompts,
// sessions and backends (its file keyring, which Flatpak and Snap sandboxes use) serve authctl
// as they serve every GNOME program.
//
// It is loaded with dlopen by the first write, not linked: linking libsecret-1 (and the libgcrypt
// it brings) costs every command about 3 M instructions at start-up, as much again as `status`
// takes in all, and `status`, `token` and `git-credential get` read without it. The few secret_*
// entry points and types are declared in loader.c, so building needs no libsecret headers;
// running a command that writes needs the runtime package libsecret-1-0.
#include <gio/gio.h>

/// Loads libsecret-1.so.0 and its symbols once (thread-safe). 0 on success; -1 when the
/// library or a symbol is missing.
int authctl_secret_load(void);

/// libsecret's error domain (`SECRET_ERROR`: `IS_LOCKED`, `NO_SUCH_OBJECT`, …).
GQuark authctl_secret_error_quark(void);

/// An item libsecret found: a `SecretItem` of the Secret Service, or an item of its file keyring.
typedef struct _AuthctlSecretItem AuthctlSecretItem;

/// `secret_password_storev_binary_sync` with the schema `schema_name` (attributes `service`,
/// `account`, `server`, `aws-role`; the name is recorded as `xdg:schema`), the `count` attributes given, in
/// `collection` (an object path; NULL for the default), performing any prompt the service returns.
gboolean authctl_secret_store(const char *schema_name, const char *const *names, const char *const *values, guint count,
                              const char *collection, const char *label, const guint8 *secret, gsize length,
                              const char *content_type, GCancellable *cancellable, GError **error);

/// `secret_service_create_item_dbus_path_sync`: a new item in the collection at `collection` (an
/// object path), never replacing one (`CreateItem`'s `replace` means different things to different
/// services, and KeePassXC 2.7.4 asks a person before it replaces another client's item), with the
/// label, the attributes and `xdg:schema` = `schema_name`, performing any prompt the service
/// returns. The new item's object path (free with `g_free`), or NULL with `error` set.
gchar *authctl_secret_create_item(const char *collection, const char *schema_name, const char *const *names,
                                  const char *const *values, guint count, const char *label, const guint8 *secret, gsize length,
                                  const char *content_type, GCancellable *cancellable, GError **error);

/// `secret_password_searchv_sync` by the attributes alone (never by schema), every match
/// (`SECRET_SEARCH_ALL`), locked or not, without unlocking. The list holds `AuthctlSecretItem`s;
/// free it with `authctl_secret_items_free`.
GList *authctl_secret_search(const char *const *names, const char *const *values, guint count, GCancellable *cancellable,
                             GError **error);

void authctl_secret_items_free(GList *items);

/// Calls `each` with every attribute of the item (`secret_retrievable_get_attributes`).
void authctl_secret_item_each_attribute(AuthctlSecretItem *item, void (*each)(const char *name, const char *value, gpointer data),
                                        gpointer data);

/// The item's label (`secret_retrievable_get_label`), to be freed with `g_free`.
gchar *authctl_secret_item_label(AuthctlSecretItem *item);

/// The item's D-Bus object path, or NULL for an item of the file keyring.
const char *authctl_secret_item_path(AuthctlSecretItem *item);

/// Whether the item is locked (`secret_item_get_locked`); FALSE for the file keyring's.
gboolean authctl_secret_item_locked(AuthctlSecretItem *item);

/// The item's secret (`secret_retrievable_retrieve_secret_sync`), copied into `*secret` (free
/// with `authctl_secret_wipe_free`), or FALSE with `error` set.
gboolean authctl_secret_item_secret(AuthctlSecretItem *item, guint8 **secret, gsize *length, GCancellable *cancellable,
                                    GError **error);

/// The secret of the item at `path`, read on a new service object with a new session
/// (`secret_service_open_sync`, `secret_item_new_for_dbus_path_sync`, then as
/// `authctl_secret_item_secret`), or FALSE with `error` set.
gboolean authctl_secret_item_secret_at(const char *path, guint8 **secret, gsize *length, GCancellable *cancellable, GError **error);

/// Overwrites and frees a secret copied out by `authctl_secret_item_secret`.
void authctl_secret_wipe_free(guint8 *secret, gsize length);

/// Deletes one item: `secret_item_delete_sync` (performing any prompt the service returns) for
/// the Secret Service's, `secret_password_clearv_sync` with its whole attribute set for the file
/// keyring's.
gboolean authctl_secret_item_delete(AuthctlSecretItem *item, GCancellable *cancellable, GError **error);

/// `secret_service_get_sync` and `secret_service_unlock_dbus_paths_sync` of the one object at
/// `path`: performs the service's unlock prompt. The number of objects unlocked (0: the prompt
/// was dismissed), or -1 with `error` set.
gint authctl_secret_unlock(const char *path, GCancellable *cancellable, GError **error);

/// `secret_service_disconnect`: drops the cached `SecretService` and backend (the file keyring's
/// items read from disk); the next call starts afresh.
void authctl_secret_disconnect(void);

/// Counts, from now on, the `Prompt.Prompt` calls this process sends on `connection` (libsecret's
/// connection, the session bus): a call that ran out of time while a prompt was shown waited for
/// a person, not for a slow service. Idempotent.
void authctl_secret_watch_prompts(GDBusConnection *connection);

/// How many `Prompt.Prompt` calls have been sent since `authctl_secret_watch_prompts`.
guint authctl_secret_prompts_shown(void);
