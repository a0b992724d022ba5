// SPDX-License-Identifier: Apache-2.0
#pragma once
// libxml2, the XML parser that reads AWS STS's answers, loaded with dlopen the first time one is
// read: a library linked into the binary is loaded by every command at start-up. Its streaming
// reader (xmlTextReader) is used through functions alone, declared in loader.c, so that building
// needs no libxml2 headers and no struct layout is assumed; running `aws-credential` needs the
// runtime package libxml2.
#include <stddef.h>

/// Loads libxml2.so.2 and its symbols once (thread-safe). 0 on success; -1 when the library or
/// a symbol is missing.
int authctl_xml_load(void);

typedef struct AuthctlXMLReader AuthctlXMLReader;

/// A reader of `length` bytes at `bytes` (kept, not copied, until it is freed) that never
/// touches the network (`XML_PARSE_NONET`), loads no external DTD, substitutes no entity
/// (neither `XML_PARSE_DTDLOAD` nor `XML_PARSE_NOENT`) and reports nothing on stderr. NULL when
/// libxml2 cannot make one.
AuthctlXMLReader *authctl_xml_reader_new(const char *bytes, int length);

/// One node of the document, in order. Strings belong to the reader and last until the next call.
typedef struct {
    int type;                       ///< libxml2's xmlReaderTypes: 1 element, 3 text, 4 CDATA, 15 end of element, …
    int depth;                      ///< 0 for the root element
    int is_empty_element;           ///< `<a/>`: no end-of-element node follows
    const char *local_name;         ///< element: its name without a prefix
    const char *namespace_uri;      ///< element: its namespace, NULL for none
    const char *value;              ///< text and CDATA: the text, entities of XML itself decoded
} AuthctlXMLNode;

/// Reads the next node into `node`: 1 when there is one, 0 at the end, -1 when the document is
/// not well-formed.
int authctl_xml_reader_next(AuthctlXMLReader *reader, AuthctlXMLNode *node);

void authctl_xml_reader_free(AuthctlXMLReader *reader);
