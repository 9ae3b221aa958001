import ZeroBridge

/// A catalogue (SPEC 7.8) read for `zerobridge types`: its actions, and the named object types their JSON Schemas
/// declare. Both generators (PythonClient, TypeScriptClient) write from this one walk of the schemas.
struct ClientModel {
    /// The catalogue's hash, which the generated code compares with the host's.
    let hash: String
    let className: String
    /// Every object type, each after the types it refers to (Python needs them in that order).
    let objects: [ObjectType]
    /// In the catalogue's order (sorted by name).
    let actions: [Action]

    struct Action {
        let name: String
        let doc: String
        let payload: ValueType
        let result: ValueType
        /// Nil for an action that sends no progress.
        let progress: ValueType?
        /// Served as a job (SPEC 7.16): its methods take an idempotency key.
        var isJob = false
        /// Whether a call may leave the payload out: its schema accepts null.
        var payloadIsOptional: Bool { payload.acceptsNull }
    }

    struct ObjectType {
        let name: String
        let doc: String
        let members: [Member]
    }

    struct Member {
        let name: String
        let type: ValueType
        let required: Bool
        let doc: String
    }

    /// `catalogue`: a `$describe` result, `{"catalogue": hash, "actions": [...]}`.
    init(catalogue: JSONValue, className: String) throws(CatalogueError) {
        guard case .object(let root) = catalogue else { throw CatalogueError("it is not a JSON object") }
        guard let hash = root["catalogue"]?.stringValue, hash.utf8.count == 64,
              hash.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else {
            throw CatalogueError("`catalogue` is not a hash (64 lowercase hex digits)")
        }
        guard let descriptions = root["actions"]?.arrayValue else { throw CatalogueError("`actions` is not a list") }
        var walk = SchemaWalk(reserved: ClientModel.reservedNames.union([className]))
        var actions: [Action] = []
        for (index, description) in descriptions.enumerated() {
            guard let name = description["name"]?.stringValue, !name.isEmpty else {
                throw CatalogueError("actions[\(index)] has no name")
            }
            guard let doc = description["doc"]?.stringValue, let payload = description["payload"],
                  let result = description["result"] else {
                throw CatalogueError("action \(name) lacks its doc, payload or result")
            }
            guard !actions.contains(where: { $0.name == name }) else { throw CatalogueError("action \(name) is there twice") }
            // `Count` for `count`: CountPayload, CountProgress, CountResult.
            let typeName = walk.claim(Naming.typeName(name, fallback: "Action"))
            func part(_ schema: JSONValue, _ part: String) -> ValueType {
                walk.type(of: schema, name: typeName + part, titled: false, doc: "The \(part.lowercased()) of `\(name)`.")
            }
            let payloadType = part(payload, "Payload")
            let progressType = description["progress"].map { part($0, "Progress") }
            actions.append(Action(name: name, doc: doc, payload: payloadType,
                                  result: part(result, "Result"), progress: progressType, isJob: description["job"] == true))
        }
        self.hash = hash
        self.className = className
        self.objects = walk.objects
        self.actions = actions
    }

    /// What the generated code declares itself or imports, which no object type may be named.
    static let reservedNames: Set<String> = [
        "Any", "AsyncIterator", "Awaitable", "Generic", "Literal", "NotRequired", "TracebackType", "TypedDict",
        "TypeVar", "TypedStream", "ProgressT", "ResultT", "CATALOGUE",
        "Array", "BigInt", "Boolean", "CallOptions", "Date", "Error", "Function", "JsonValue", "Map", "Number",
        "Object", "Peer", "Promise", "Record", "Set", "StreamingCall", "String", "Symbol", "Uint8Array",
    ]

    /// `ConformanceClient` for a host named `conformance` (or a file `conformance.json`).
    static func className(from name: String) -> String {
        let base = Naming.typeName(name, fallback: "Host")
        return base.hasSuffix("Client") ? base : base + "Client"
    }
}

struct CatalogueError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A JSON value's type, as far as the keywords of SPEC 7.8 say; anything else is `.any`.
indirect enum ValueType: Equatable {
    case any, null, boolean, integer, number, string, bytes
    /// `enum` or `const`: exactly these values.
    case literals([JSONValue])
    case array(of: ValueType)
    /// An object with no declared members: names to values of one type (`additionalProperties`).
    case map(of: ValueType)
    /// A declared ``ClientModel/ObjectType``, by name.
    case object(String)
    /// Two or more types, none of them a union or `.any`.
    case union([ValueType])

    /// `anyOf`: flattened, without repeats; `.any` when one of them is.
    static func union(of types: [ValueType]) -> ValueType {
        var members: [ValueType] = []
        for type in types.flatMap({ if case .union(let inner) = $0 { inner } else { [$0] } }) {
            if type == .any { return .any }
            if !members.contains(type) { members.append(type) }
        }
        return members.count == 1 ? members[0] : members.isEmpty ? .any : .union(members)
    }

    var acceptsNull: Bool {
        switch self {
        case .any, .null: true
        case .literals(let values): values.contains(.null)
        case .union(let types): types.contains { $0.acceptsNull }
        default: false
        }
    }
}

/// The walk from JSON Schemas to types: declares an object type for each object schema with properties, named
/// after its place (`CountPayload`) or, nested, its `title` (else its property path: `CountPayloadOptions`).
private struct SchemaWalk {
    private(set) var objects: [ClientModel.ObjectType] = []
    private var names: UniqueNames
    /// The schemas of declared objects, by name: an identical schema met again under the same name is that type.
    private var declared: [String: JSONValue] = [:]

    /// The keywords of SPEC 7.8, and `contentEncoding` (bytes). A schema with any other is any value.
    private static let keywords: Set<String> = [
        "type", "properties", "required", "additionalProperties", "items", "prefixItems", "enum", "const", "anyOf",
        "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "uniqueItems", "format", "title",
        "description", "$comment", "contentEncoding",
    ]

    init(reserved: Set<String>) { names = UniqueNames(used: reserved) }

    mutating func claim(_ name: String) -> String { names.claim(name) }

    /// The type of `schema`; an object it declares is called `name` unless `titled` lets its title name it.
    mutating func type(of schema: JSONValue, name: String, titled: Bool, doc: String = "") -> ValueType {
        guard case .object(let schema) = schema, schema.keys.allSatisfy(Self.keywords.contains) else { return .any }
        if let value = schema["const"] { return .literals([value]) }
        if let values = schema["enum"]?.arrayValue, !values.isEmpty { return .literals(values) }
        if let branches = schema["anyOf"]?.arrayValue {
            return .union(of: branches.map { type(of: $0, name: name, titled: titled, doc: doc) })
        }
        let names: [String]
        switch schema["type"] {
        case .string(let one)?: names = [one]
        case .array(let list)?: names = list.compactMap(\.stringValue)
        case nil where schema["properties"] != nil || schema["additionalProperties"] != nil: names = ["object"]
        case nil where schema["items"] != nil || schema["prefixItems"] != nil: names = ["array"]
        default: return .any
        }
        return .union(of: names.map { type(named: $0, schema, name: name, titled: titled, doc: doc) })
    }

    private mutating func type(named typeName: String, _ schema: [String: JSONValue], name: String, titled: Bool,
                               doc: String) -> ValueType {
        switch typeName {
        case "null": return .null
        case "boolean": return .boolean
        case "integer": return .integer
        case "number": return .number
        case "string": return schema["contentEncoding"] == "base64" ? .bytes : .string
        case "array":
            let prefix = schema["prefixItems"]?.arrayValue ?? []
            var elements = prefix.map { type(of: $0, name: name + "Item", titled: true) }
            switch schema["items"] {
            case nil: elements.append(.any)
            case .bool(false)?: break
            case let items?: elements.append(type(of: items, name: name + "Item", titled: true))
            }
            return .array(of: .union(of: elements))
        case "object":
            guard let properties = schema["properties"]?.objectValue, !properties.isEmpty else {
                switch schema["additionalProperties"] {
                case nil, .bool?: return .map(of: .any)
                case let values?: return .map(of: type(of: values, name: name + "Value", titled: true))
                }
            }
            return declare(schema, properties, name: name, titled: titled, doc: doc)
        default:
            return .any
        }
    }

    private mutating func declare(_ schema: [String: JSONValue], _ properties: [String: JSONValue], name: String,
                                  titled: Bool, doc: String) -> ValueType {
        let title = titled ? schema["title"]?.stringValue.map { Naming.typeName($0, fallback: "") } ?? "" : ""
        let candidates = title.isEmpty ? [name] : [title, name]
        if let same = candidates.first(where: { declared[$0] == .object(schema) }) { return .object(same) }
        let typeName = claim(candidates.first { !names.used.contains($0) } ?? name)
        declared[typeName] = .object(schema)
        let required = Set(schema["required"]?.arrayValue?.compactMap(\.stringValue) ?? [])
        let members = properties.keys.sorted { $0.utf16.lexicographicallyPrecedes($1.utf16) }.map { key in
            ClientModel.Member(name: key, type: type(of: properties[key]!, name: typeName + Naming.typeName(key, fallback: "Member"), titled: true),
                               required: required.contains(key), doc: properties[key]?["description"]?.stringValue ?? "")
        }
        objects.append(.init(name: typeName, doc: schema["description"]?.stringValue ?? doc, members: members))
        return .object(typeName)
    }
}

/// Names given out once each.
struct UniqueNames {
    private(set) var used: Set<String>

    init(used: Set<String>) { self.used = used }

    /// `name`, or `name2`, `name3`...: the first not given out yet, now taken.
    mutating func claim(_ name: String) -> String {
        var candidate = name
        var number = 2
        while used.contains(candidate) {
            candidate = name + String(number)
            number += 1
        }
        used.insert(candidate)
        return candidate
    }
}

/// Names in generated code, made from action, member and title names that may be anything.
enum Naming {
    /// The ASCII words of `text`: split at what is not a letter or digit, and where camelCase changes case
    /// (`importHTTPFile` -> import, HTTP, File).
    static func words(_ text: String) -> [String] {
        var words: [String] = []
        var current: [Character] = []
        let characters = Array(text)
        for (index, character) in characters.enumerated() {
            guard character.isASCII, character.isLetter || character.isNumber else {
                if !current.isEmpty { words.append(String(current)) }
                current = []
                continue
            }
            if let last = current.last, character.isUppercase {
                let nextIsLower = index + 1 < characters.count && characters[index + 1].isLowercase
                if last.isLowercase || last.isNumber || (last.isUppercase && nextIsLower) {
                    words.append(String(current))
                    current = []
                }
            }
            current.append(character)
        }
        if !current.isEmpty { words.append(String(current)) }
        return words
    }

    /// PascalCase, as type names are: `import-file` -> `ImportFile`; `fallback` when nothing is left.
    static func typeName(_ text: String, fallback: String) -> String {
        let name = words(text).map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
        guard let first = name.first else { return fallback }
        return first.isNumber ? "T" + name : name
    }

    /// snake_case: `importFile` -> `import_file`.
    static func snakeCase(_ text: String) -> String {
        let name = words(text).map { $0.lowercased() }.joined(separator: "_")
        guard let first = name.first else { return "action" }
        return first.isNumber ? "action_" + name : name
    }

    /// camelCase: `import_file` -> `importFile`.
    static func camelCase(_ text: String) -> String {
        let words = words(text)
        let name = (words.first?.lowercased() ?? "action")
            + words.dropFirst().map { $0.prefix(1).uppercased() + $0.dropFirst().lowercased() }.joined()
        return name.first!.isNumber ? "action" + name : name
    }

    /// One method name per action (and `<name><suffix>` per action with progress), made by `make`, unique, and
    /// none of `reserved`: `[action name: (call, stream)]`.
    static func methods(for actions: [ClientModel.Action], make: (String) -> String, streamSuffix: String,
                        reserved: Set<String>) -> [String: (call: String, stream: String?)] {
        var names = UniqueNames(used: reserved)
        let calls = actions.map { names.claim(make($0.name)) }
        var methods: [String: (call: String, stream: String?)] = [:]
        for (action, call) in zip(actions, calls) {
            methods[action.name] = (call, action.progress == nil ? nil : names.claim(call + streamSuffix))
        }
        return methods
    }

    /// `text` as a string literal that Python and JavaScript both read back as `text`.
    static func quoted(_ text: String) -> String {
        var literal = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": literal += "\\\""
            case "\\": literal += "\\\\"
            case "\n": literal += "\\n"
            case "\t": literal += "\\t"
            case "\r": literal += "\\r"
            case _ where scalar.value < 0x20 || (0x7f...0x9f).contains(scalar.value) || scalar.value == 0x2028 || scalar.value == 0x2029:
                let hex = String(scalar.value, radix: 16)
                literal += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: literal.unicodeScalars.append(scalar)
            }
        }
        return literal + "\""
    }
}
