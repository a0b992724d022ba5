// SPDX-License-Identifier: Apache-2.0
#include "shim.h"
#include <dlfcn.h>
#include <stdlib.h>

// The values of `QRencodeMode` in qrencode.h that authctl passes; the soname is that of libqrencode 4.
enum { QR_MODE_8 = 2 };

struct AuthctlQREncode {
    QRcode *(*encode_string)(const char *string, int version, int level, int hint, int casesensitive);
    void (*free)(QRcode *code);
};

const AuthctlQREncode *authctl_qrencode_open(const char *soname) {
    void *handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!handle) return NULL;
    AuthctlQREncode *library = malloc(sizeof *library);
    if (library
        && (*(void **)&library->encode_string = dlsym(handle, "QRcode_encodeString"))
        && (*(void **)&library->free = dlsym(handle, "QRcode_free"))) {
        return library;
    }
    free(library);
    dlclose(handle);
    return NULL;
}

QRcode *authctl_qrencode_encode(const AuthctlQREncode *library, const char *text, AuthctlQRLevel level) {
    return library->encode_string(text, 0, (int)level, QR_MODE_8, 1);
}

void authctl_qrencode_free(const AuthctlQREncode *library, QRcode *code) {
    library->free(code);
}
