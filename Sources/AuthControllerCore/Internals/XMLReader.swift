// SPDX-License-Identifier: Apache-2.0
internal import CLibxml2

/// A small XML document read through libxml2's streaming reader (`CLibxml2/shim.h`) into
/// elements: no DTD (a document that declares one is refused before anything in it is used), no
/// entity but XML's own five and character references, no network, and at most
/// ``maximumSize`` bytes. What reads an answer a server sent (AWS STS's) uses it.
struct XMLElement: Equatable, Sendable {
    /// The name without a prefix.
    var name: String
    /// The namespace URI, `nil` for none.
    var namespace: String?
    /// The text directly inside it (its children's text not included).
    var text: String
    var children: [XMLElement]

    /// The children called `name` in `namespace`.
    func children(_ name: String, in namespace: String?) -> [XMLElement] {
        children.filter { $0.name == name && $0.namespace == namespace }
    }

    /// The largest document read, in bytes: an STS answer is about 2 KiB.
    static let maximumSize = 64 * 1024
    /// The deepest nesting read: STS's answers are four deep.
    static let maximumDepth = 32

    /// Why a document was not read.
    enum Refusal: Error, Equatable {
        case tooLarge
        case notWellFormed
        /// A DTD, or a reference to an entity one would declare: nothing an answer needs, and the
        /// way to the "billion laughs" and to external entities.
        case declarations
        case tooDeep
        case unavailable
    }

    /// The root element of `bytes`.
    static func document(_ bytes: [UInt8]) throws(Refusal) -> XMLElement {
        guard bytes.count <= maximumSize else { throw .tooLarge }
        guard !bytes.isEmpty else { throw .notWellFormed }
        guard authctl_xml_load() == 0 else { throw .unavailable }
        return try bytes.withUnsafeBufferPointer { (buffer) throws(Refusal) -> XMLElement in
            try buffer.withMemoryRebound(to: CChar.self) { (characters) throws(Refusal) -> XMLElement in
                // libxml2 is loaded: a reader it cannot make is one it cannot read.
                guard let reader = authctl_xml_reader_new(characters.baseAddress, Int32(characters.count)) else { throw .notWellFormed }
                defer { authctl_xml_reader_free(reader) }
                return try read(reader)
            }
        }
    }

    // libxml2's xmlReaderTypes.
    private static let elementStart: Int32 = 1, text: Int32 = 3, cdata: Int32 = 4, entityReference: Int32 = 5,
                       entity: Int32 = 6, documentType: Int32 = 10, elementEnd: Int32 = 15, notation: Int32 = 12

    private static func read(_ reader: OpaquePointer) throws(Refusal) -> XMLElement {
        var open: [XMLElement] = []
        var root: XMLElement?
        var node = AuthctlXMLNode()
        func close() {
            let element = open.removeLast()
            if open.isEmpty { root = element } else { open[open.count - 1].children.append(element) }
        }
        while true {
            let result = authctl_xml_reader_next(reader, &node)
            guard result != 0 else { break }
            guard result == 1 else { throw .notWellFormed }
            switch node.type {
            case documentType, entityReference, entity, notation:
                throw .declarations
            case elementStart:
                // A second root element is not well-formed, and libxml2 says so; this is the backstop.
                guard root == nil else { throw .notWellFormed }
                guard open.count < maximumDepth else { throw .tooDeep }
                open.append(XMLElement(name: node.local_name.map { String(cString: $0) } ?? "",
                                       namespace: node.namespace_uri.map { String(cString: $0) }, text: "", children: []))
                if node.is_empty_element != 0 { close() }
            case text, cdata:
                guard !open.isEmpty else { throw .notWellFormed }
                open[open.count - 1].text += node.value.map { String(cString: $0) } ?? ""
            case elementEnd:
                guard !open.isEmpty else { throw .notWellFormed }
                close()
            default:
                // Comments, processing instructions, whitespace outside text: nothing to read.
                continue
            }
        }
        guard open.isEmpty, let root else { throw .notWellFormed }
        return root
    }
}
