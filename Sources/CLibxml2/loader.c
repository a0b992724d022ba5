// SPDX-License-Identifier: Apache-2.0
#include "shim.h"
#include <dlfcn.h>
#include <pthread.h>

// The libxml2 entry points authctl calls, declared here rather than taken from its headers (see
// shim.h). Signatures and option values are those of libxml2 2.9 (xmlreader.h, parser.h); the
// soname is stable.
enum { XML_PARSE_NOERROR = 1 << 5, XML_PARSE_NOWARNING = 1 << 6, XML_PARSE_NONET = 1 << 11 };

static struct {
    void *(*reader_for_memory)(const char *, int, const char *, const char *, int);
    int (*read)(void *);
    int (*node_type)(void *);
    int (*depth)(void *);
    int (*is_empty_element)(void *);
    const unsigned char *(*const_local_name)(void *);
    const unsigned char *(*const_namespace_uri)(void *);
    const unsigned char *(*const_value)(void *);
    void (*free_reader)(void *);
} xml;

static int loaded = -1;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
    void *library = dlopen("libxml2.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!library) return;
#define SYMBOL(field, name) if (!(*(void **)&xml.field = dlsym(library, name))) return;
    SYMBOL(reader_for_memory, "xmlReaderForMemory")
    SYMBOL(read, "xmlTextReaderRead")
    SYMBOL(node_type, "xmlTextReaderNodeType")
    SYMBOL(depth, "xmlTextReaderDepth")
    SYMBOL(is_empty_element, "xmlTextReaderIsEmptyElement")
    SYMBOL(const_local_name, "xmlTextReaderConstLocalName")
    SYMBOL(const_namespace_uri, "xmlTextReaderConstNamespaceUri")
    SYMBOL(const_value, "xmlTextReaderConstValue")
    SYMBOL(free_reader, "xmlFreeTextReader")
#undef SYMBOL
    loaded = 0;
}

int authctl_xml_load(void) {
    pthread_once(&once, load);
    return loaded;
}

AuthctlXMLReader *authctl_xml_reader_new(const char *bytes, int length) {
    if (authctl_xml_load() != 0) return NULL;
    // Options name what is on; entity substitution (XML_PARSE_NOENT) and DTD loading
    // (XML_PARSE_DTDLOAD, XML_PARSE_DTDATTR) stay off.
    return xml.reader_for_memory(bytes, length, NULL, "UTF-8", XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
}

int authctl_xml_reader_next(AuthctlXMLReader *reader, AuthctlXMLNode *node) {
    int result = xml.read(reader);
    if (result != 1) return result < 0 ? -1 : 0;
    node->type = xml.node_type(reader);
    node->depth = xml.depth(reader);
    node->is_empty_element = xml.is_empty_element(reader) == 1;
    node->local_name = (const char *)xml.const_local_name(reader);
    node->namespace_uri = (const char *)xml.const_namespace_uri(reader);
    node->value = (node->type == 3 || node->type == 4) ? (const char *)xml.const_value(reader) : NULL;
    return 1;
}

void authctl_xml_reader_free(AuthctlXMLReader *reader) {
    if (reader) xml.free_reader(reader);
}
