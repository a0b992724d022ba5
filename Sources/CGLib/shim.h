// SPDX-License-Identifier: Apache-2.0
#pragma once
// GLib, GObject and GIO (GDBus, GKeyFile, GFileMonitor), plus a few inline helpers for what Swift
// cannot call directly: C macros and variadic functions. libsecret is loaded on demand (CLibsecret).
#include <gio/gio.h>
#include <glib.h>
#include <glib-object.h>

/// Replaces the `G_VARIANT_TYPE("...")` cast macro.
static inline const GVariantType *authctl_variant_type(const char *type_string) {
    return (const GVariantType *)type_string;
}

/// Replaces `G_IS_IO_ERROR` style checks: the quark of GIO's error domain.
static inline GQuark authctl_io_error_quark(void) { return G_IO_ERROR; }
/// The quark of GDBus's error domain (`G_DBUS_ERROR`).
static inline GQuark authctl_dbus_error_quark(void) { return G_DBUS_ERROR; }
/// The quark of GKeyFile's error domain (`G_KEY_FILE_ERROR`).
static inline GQuark authctl_key_file_error_quark(void) { return G_KEY_FILE_ERROR; }

/// Replaces `g_object_unref` for any GObject-derived pointer Swift sees as opaque.
static inline void authctl_object_unref(void *object) { g_object_unref(object); }

/// Replaces the `G_OBJECT(...)` cast.
static inline GObject *authctl_object(void *object) { return (GObject *)object; }
