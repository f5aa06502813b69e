//! JSON Schema compiled to nodes: each schema of the document once, each
//! `$ref` target once (from a worklist, not inside one another), then
//! linked (`schema_link.rs`).

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::schema::{
    invalid, types, unsupported, Node, NodeId, Property, Rules, Schema, SchemaError, ANY, MAX_LITERAL_BYTES, MAX_NODES,
    MAX_PROPERTIES, MAX_SCHEMA_NESTING,
};
use super::schema_link::link;

/// Keywords read past.
const ANNOTATIONS: [&str; 12] = [
    "title",
    "description",
    "default",
    "examples",
    "$schema",
    "$id",
    "$comment",
    "format",
    "deprecated",
    "readOnly",
    "writeOnly",
    "discriminator",
];

impl Schema {
    /// Compiles a JSON Schema document.
    ///
    /// The cost is linear in the document's size: every `$ref` target is
    /// compiled once and referred to, never copied, and nested `anyOf`s
    /// are flattened once each. The compiled schema holds at most
    /// [`MAX_NODES`] nodes and [`MAX_LITERAL_BYTES`] of literal values,
    /// and the compiler recurses at most [`MAX_SCHEMA_NESTING`] levels
    /// whatever the references.
    pub fn compile(document: &Value) -> Result<Schema, SchemaError> {
        let mut compiler = Compiler::new(document);
        let root = compiler.node(document, "")?;
        compiler.compile_references()?;
        link(compiler.nodes, root)
    }

    /// A tool call: an object `{"name": N, "arguments": A}` for one of
    /// `tools` (a name and its parameters' schema), `name` first.
    pub fn tool_call<'a>(tools: impl IntoIterator<Item = (&'a str, &'a Value)>) -> Result<Schema, SchemaError> {
        let mut compiler = Compiler::new(&Value::Null);
        let mut calls = Vec::new();
        for (i, (name, parameters)) in tools.into_iter().enumerate() {
            compiler.document = parameters;
            compiler.refs.clear();
            let arguments = compiler.node(parameters, &format!("/tools/{i}/function/parameters"))?;
            compiler.compile_references()?;
            let name = compiler.push(Node::Literals(vec![compact(&Value::from(name))]))?;
            let property = |key: &str, node| Property { key: key.as_bytes().to_vec(), node, required: true };
            let properties = vec![property("name", name), property("arguments", arguments)];
            let call = Rules { properties, additional: None, ordered: true, ..Rules::of(types::OBJECT) };
            calls.push(compiler.push(Node::Typed(call))?);
        }
        if calls.is_empty() {
            return Err(invalid("/tools", "no tools to call"));
        }
        let root = if calls.len() == 1 { calls[0] } else { compiler.push(Node::AnyOf(calls))? };
        link(compiler.nodes, root)
    }
}

/// A value written compactly (the bytes a literal must be).
fn compact(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

struct Compiler<'a> {
    document: &'a Value,
    nodes: Vec<Node>,
    /// Each `$ref` of the document reached so far, with its node.
    refs: HashMap<String, NodeId>,
    /// References whose targets are still to compile: the reference's
    /// node, the target and its pointer.
    unresolved: Vec<(NodeId, &'a Value, String)>,
    /// Levels of [`node`](Self::node) now open.
    nesting: usize,
    /// Bytes of literal values so far.
    literal_bytes: usize,
}

impl<'a> Compiler<'a> {
    fn new(document: &'a Value) -> Compiler<'a> {
        Compiler {
            document,
            nodes: vec![Node::Typed(Rules::of(types::ALL))],
            refs: HashMap::new(),
            unresolved: Vec::new(),
            nesting: 0,
            literal_bytes: 0,
        }
    }

    /// Compiles the targets of the references reached, and of those their
    /// targets reach, one after another (not inside one another: a chain
    /// of references is a loop here, not a recursion).
    fn compile_references(&mut self) -> Result<(), SchemaError> {
        while let Some((id, target, pointer)) = self.unresolved.pop() {
            let compiled = self.node(target, &pointer)?;
            self.nodes[id as usize] = Node::Alias(compiled);
        }
        Ok(())
    }

    fn push(&mut self, node: Node) -> Result<NodeId, SchemaError> {
        if self.nodes.len() >= MAX_NODES {
            return Err(invalid("/", format!("the schema compiles to more than {MAX_NODES} nodes")));
        }
        self.nodes.push(node);
        Ok((self.nodes.len() - 1) as NodeId)
    }

    fn node(&mut self, schema: &'a Value, path: &str) -> Result<NodeId, SchemaError> {
        if self.nesting >= MAX_SCHEMA_NESTING {
            return Err(invalid(path, format!("schemas nest deeper than {MAX_SCHEMA_NESTING} levels")));
        }
        self.nesting += 1;
        let compiled = self.node_within(schema, path);
        self.nesting -= 1;
        compiled
    }

    fn node_within(&mut self, schema: &'a Value, path: &str) -> Result<NodeId, SchemaError> {
        let object = match schema {
            Value::Bool(true) => return Ok(ANY),
            Value::Bool(false) => return Err(unsupported(path, "false")),
            Value::Object(object) => object,
            _ => return Err(invalid(path, "a schema is an object or a boolean")),
        };
        if let Some(reference) = object.get("$ref") {
            return self.reference(object, reference, path);
        }
        if let Some(literals) = self.literals(object, path)? {
            return self.push(Node::Literals(literals));
        }
        if let Some(all) = object.get("allOf") {
            self.only(object, &["allOf"], path)?;
            return match all.as_array().map(Vec::as_slice) {
                Some([one]) => self.node(one, &format!("{path}/allOf/0")),
                _ => Err(unsupported(path, "allOf")),
            };
        }
        if let Some(any) = object.get("anyOf") {
            self.only(object, &["anyOf", "$defs", "definitions"], path)?;
            let branches =
                any.as_array().filter(|a| !a.is_empty()).ok_or_else(|| invalid(path, "anyOf is a non-empty array"))?;
            let mut children = Vec::with_capacity(branches.len());
            for (i, branch) in branches.iter().enumerate() {
                children.push(self.node(branch, &format!("{path}/anyOf/{i}"))?);
            }
            return self.push(Node::AnyOf(children));
        }
        self.typed(object, path)
    }

    /// Fails on any keyword besides `allowed` and the annotations.
    fn only(&self, object: &Map<String, Value>, allowed: &[&str], path: &str) -> Result<(), SchemaError> {
        match object.keys().find(|k| !allowed.contains(&k.as_str()) && !ANNOTATIONS.contains(&k.as_str())) {
            Some(keyword) => Err(unsupported(path, keyword)),
            None => Ok(()),
        }
    }

    fn reference(
        &mut self,
        object: &Map<String, Value>,
        reference: &'a Value,
        path: &str,
    ) -> Result<NodeId, SchemaError> {
        self.only(object, &["$ref", "$defs", "definitions"], path)?;
        let reference = reference.as_str().ok_or_else(|| invalid(path, "$ref is a string"))?;
        if let Some(&id) = self.refs.get(reference) {
            return Ok(id);
        }
        let pointer = reference.strip_prefix('#').ok_or_else(|| unsupported(path, "$ref outside the document"))?;
        let target = self
            .document
            .pointer(pointer)
            .ok_or_else(|| invalid(path, format!("$ref {reference} points at nothing")))?;
        // The reference's node stands for its target, which compiles later
        // (`compile_references`); linking points every use at the target.
        let id = self.push(Node::Pending)?;
        self.refs.insert(reference.to_string(), id);
        self.unresolved.push((id, target, pointer.to_string()));
        Ok(id)
    }

    fn literals(&mut self, object: &Map<String, Value>, path: &str) -> Result<Option<Vec<Vec<u8>>>, SchemaError> {
        let values = match (object.get("enum"), object.get("const")) {
            (Some(_), Some(_)) => return Err(unsupported(path, "enum beside const")),
            (Some(Value::Array(values)), None) if !values.is_empty() => values.iter().collect::<Vec<_>>(),
            (Some(_), None) => return Err(invalid(path, "enum is a non-empty array")),
            (None, Some(value)) => vec![value],
            (None, None) => return Ok(None),
        };
        self.only(object, &["enum", "const", "type"], path)?;
        // A `type` beside them keeps the values of that type.
        let kinds = match object.get("type") {
            Some(t) => type_bits(t, path)?,
            None => types::ALL,
        };
        let kept: Vec<Vec<u8>> = values.into_iter().filter(|v| value_type(v) & kinds != 0).map(compact).collect();
        if kept.is_empty() {
            return Err(invalid(path, "no value of enum/const has the type given"));
        }
        self.literal_bytes += kept.iter().map(Vec::len).sum::<usize>();
        if self.literal_bytes > MAX_LITERAL_BYTES {
            return Err(invalid(path, format!("enum and const values exceed {MAX_LITERAL_BYTES} bytes in all")));
        }
        Ok(Some(kept))
    }

    fn typed(&mut self, object: &'a Map<String, Value>, path: &str) -> Result<NodeId, SchemaError> {
        const KEYWORDS: [&str; 11] = [
            "type",
            "properties",
            "required",
            "additionalProperties",
            "items",
            "minItems",
            "maxItems",
            "minLength",
            "maxLength",
            "$defs",
            "definitions",
        ];
        self.only(object, &KEYWORDS, path)?;
        let kinds = match object.get("type") {
            Some(t) => type_bits(t, path)?,
            None => types::ALL,
        };
        let count = |key: &str| -> Result<Option<u32>, SchemaError> {
            match object.get(key) {
                None => Ok(None),
                Some(v) => v
                    .as_u64()
                    .map(|n| Some(n.min(u32::MAX as u64) as u32))
                    .ok_or_else(|| invalid(path, format!("{key} is a non-negative integer"))),
            }
        };
        let (min_items, max_items) = (count("minItems")?.unwrap_or(0), count("maxItems")?.unwrap_or(u32::MAX));
        let (min_length, max_length) = (count("minLength")?.unwrap_or(0), count("maxLength")?.unwrap_or(u32::MAX));
        if min_items > max_items || min_length > max_length {
            return Err(invalid(path, "a minimum above its maximum"));
        }
        let items = match object.get("items") {
            None => ANY,
            Some(Value::Array(_)) => return Err(unsupported(path, "items as an array (prefixItems)")),
            Some(items) => self.node(items, &format!("{path}/items"))?,
        };
        let mut required: Vec<&str> = Vec::new();
        match object.get("required") {
            None => {}
            Some(Value::Array(names)) => {
                let mut listed = std::collections::HashSet::new();
                for name in names {
                    let name = name.as_str().ok_or_else(|| invalid(path, "required lists strings"))?;
                    // A name listed twice is required once.
                    if listed.insert(name) {
                        required.push(name);
                    }
                }
            }
            Some(_) => return Err(invalid(path, "required is an array of strings")),
        }
        let mut properties = Vec::new();
        if let Some(declared) = object.get("properties") {
            let declared = declared.as_object().ok_or_else(|| invalid(path, "properties is an object"))?;
            if declared.len() > MAX_PROPERTIES {
                return Err(unsupported(path, &format!("more than {MAX_PROPERTIES} properties")));
            }
            for (name, schema) in declared {
                let node = self.node(schema, &format!("{path}/properties/{}", pointer_escape(name)))?;
                properties.push(Property { key: key_of(name), node, required: required.contains(&&**name) });
            }
        }
        // Without `additionalProperties`, an object that declares properties
        // is written with those only (as llama.cpp's grammars and XGrammar
        // generate: a model left free adds keys of its own until it runs
        // out of tokens); one that declares none takes any names.
        let additional = match object.get("additionalProperties") {
            None if !properties.is_empty() => None,
            None | Some(Value::Bool(true)) => Some(ANY),
            Some(Value::Bool(false)) => None,
            Some(schema) => Some(self.node(schema, &format!("{path}/additionalProperties"))?),
        };
        let undeclared: Vec<Vec<u8>> =
            required.iter().map(|n| key_of(n)).filter(|k| !properties.iter().any(|p| p.key == *k)).collect();
        if let Some(key) = undeclared.first() {
            // A required name with no schema of its own: a value of the
            // other names' schema (any value when the schema says nothing
            // of other names); refused when other names are refused.
            let name = String::from_utf8_lossy(key);
            let node = match (object.get("additionalProperties"), additional) {
                (None, _) => ANY,
                (_, Some(node)) => node,
                (_, None) => {
                    return Err(invalid(path, format!("required property \"{name}\" is not in properties")));
                }
            };
            if properties.len() + undeclared.len() > MAX_PROPERTIES {
                return Err(unsupported(path, &format!("more than {MAX_PROPERTIES} properties")));
            }
            properties.extend(undeclared.into_iter().map(|key| Property { key, node, required: true }));
        }
        self.push(Node::Typed(Rules {
            types: kinds,
            properties,
            additional,
            ordered: false,
            items,
            min_items,
            max_items,
            min_length,
            max_length,
        }))
    }
}

/// A name as it stands between the quotes of a JSON key.
fn key_of(name: &str) -> Vec<u8> {
    let quoted = compact(&Value::from(name));
    quoted[1..quoted.len() - 1].to_vec()
}

/// `~` and `/` escaped for a JSON pointer.
fn pointer_escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

fn type_bits(value: &Value, path: &str) -> Result<u8, SchemaError> {
    let one = |v: &Value| -> Result<u8, SchemaError> {
        Ok(match v.as_str() {
            Some("object") => types::OBJECT,
            Some("array") => types::ARRAY,
            Some("string") => types::STRING,
            Some("number") => types::NUMBER | types::INTEGER,
            Some("integer") => types::INTEGER,
            Some("boolean") => types::BOOLEAN,
            Some("null") => types::NULL,
            _ => return Err(invalid(path, format!("unknown type {v}"))),
        })
    };
    match value {
        Value::Array(list) if !list.is_empty() => list.iter().try_fold(0, |bits, v| Ok(bits | one(v)?)),
        Value::Array(_) => Err(invalid(path, "type is a name or a non-empty list")),
        v => one(v),
    }
}

/// The type bit of a value (an integral number counts as an integer).
fn value_type(value: &Value) -> u8 {
    match value {
        Value::Object(_) => types::OBJECT,
        Value::Array(_) => types::ARRAY,
        Value::String(_) => types::STRING,
        Value::Number(n) if n.is_i64() || n.is_u64() => types::INTEGER,
        Value::Number(_) => types::NUMBER,
        Value::Bool(_) => types::BOOLEAN,
        Value::Null => types::NULL,
    }
}
