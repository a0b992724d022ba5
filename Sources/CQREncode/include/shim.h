// SPDX-License-Identifier: Apache-2.0
#pragma once
// libqrencode, which draws the QR code of the device flow's verification URI, loaded with dlopen when
// a QR code is drawn: a library linked into the binary is loaded by every command at start-up, and
// only an interactive device sign-in draws one. Building needs no libqrencode headers (the struct and
// the two entry points are declared here and in loader.c, as qrencode.h of libqrencode 4 has them);
// drawing a QR code needs the runtime package libqrencode4.

/// A QR code symbol as libqrencode returns it (`QRcode` in qrencode.h): `width` × `width` modules,
/// row by row, one byte each, whose lowest bit is set for a dark module.
typedef struct {
    int version;
    int width;
    unsigned char *data;
} QRcode;

/// The error correction levels of qrencode.h (`QRecLevel`): L recovers about 7 % of the symbol,
/// M 15 %, Q 25 %, H 30 %.
typedef enum {
    AUTHCTL_QR_ECLEVEL_L = 0,
    AUTHCTL_QR_ECLEVEL_M,
    AUTHCTL_QR_ECLEVEL_Q,
    AUTHCTL_QR_ECLEVEL_H
} AuthctlQRLevel;

/// The entry points of one loaded libqrencode.
typedef struct AuthctlQREncode AuthctlQREncode;

/// Loads the library `soname` (`dlopen`) and its entry points. NULL when the library or an entry
/// point is missing. The result is never freed: the library stays loaded for the process.
const AuthctlQREncode *authctl_qrencode_open(const char *soname);

/// `QRcode_encodeString(text, 0, level, QR_MODE_8, 1)`, as the `qrencode` command encodes: the
/// smallest version that holds `text`, case kept, each stretch of the text in the densest mode
/// that holds it (bytes, alphanumeric or numeric). NULL with `errno` set on failure: `EINVAL` for
/// an empty text, `ERANGE` for a text too long for any version, `ENOMEM`.
QRcode *authctl_qrencode_encode(const AuthctlQREncode *library, const char *text, AuthctlQRLevel level);

/// `QRcode_free`.
void authctl_qrencode_free(const AuthctlQREncode *library, QRcode *code);
