//! JSON Schema compiled to the rules a [`SchemaPrefix`](super::SchemaPrefix)
//! reads text by.
//!
//! The subset served is what structured-output clients send (OpenAI's
//! strict mode, Pydantic's models): `type` (one or several), `properties`,
//! `required`, `additionalProperties` (a boolean or a schema), `items`,
//! `minItems`/`maxItems`, `minLength`/`maxLength`, `enum`, `const`,
//! `anyOf`, a one-element `allOf`, and `$ref` into `$defs`/`definitions`
//! (recursion included). Annotations (`title`, `description`, `default`,
//! `examples`, `$schema`, `$id`, `$comment`, `format`, `deprecated`,
//! `readOnly`, `writeOnly`, `discriminator`) are read past: `format` is an
//! annotation unless a validator is told to assert it. Every other keyword
//! is refused with a [`SchemaError`] that names it, rather than served
//! without being enforced.

/// A node's index in [`Schema::nodes`].
pub(super) type NodeId = u32;

/// The node that accepts any JSON value.
pub(super) const ANY: NodeId = 0;

/// Most properties an object schema may name (the reader keeps the ones
/// seen in a 64-bit set).
pub const MAX_PROPERTIES: usize = 64;

/// Most nodes a schema compiles to.
pub(super) const MAX_NODES: usize = 4096;

/// Most bytes of `enum` and `const` values a schema holds in all.
pub(super) const MAX_LITERAL_BYTES: usize = 1 << 20;

/// Most levels of schemas inside schemas in one document (a `$ref` starts
/// again from its target, so chains of references do not add up).
pub const MAX_SCHEMA_NESTING: usize = 256;

/// JSON types, as bits.
pub(super) mod types {
    pub const OBJECT: u8 = 1;
    pub const ARRAY: u8 = 2;
    pub const STRING: u8 = 4;
    pub const NUMBER: u8 = 8;
    pub const INTEGER: u8 = 16;
    pub const BOOLEAN: u8 = 32;
    pub const NULL: u8 = 64;
    pub const ALL: u8 = 127;
}

/// One property of an object schema.
#[derive(Clone, Debug)]
pub(super) struct Property {
    /// The name as it stands between the quotes of a JSON key (escaped).
    pub key: Vec<u8>,
    pub node: NodeId,
    pub required: bool,
}

/// What values of the listed types must be (each rule applies to its type).
#[derive(Clone, Debug)]
pub(super) struct Rules {
    pub types: u8,
    pub properties: Vec<Property>,
    /// The schema of keys not in `properties`; `None`: none allowed.
    pub additional: Option<NodeId>,
    /// Properties come in their order, each once, the required first
    /// (tool calls: `name` before `arguments`).
    pub ordered: bool,
    pub items: NodeId,
    pub min_items: u32,
    pub max_items: u32,
    pub min_length: u32,
    pub max_length: u32,
}

/// The rules of a node that is not [`Node::Typed`]: no type.
pub(super) static NO_RULES: Rules = Rules {
    types: 0,
    properties: Vec::new(),
    additional: None,
    ordered: false,
    items: ANY,
    min_items: 0,
    max_items: 0,
    min_length: 0,
    max_length: 0,
};

impl Rules {
    pub(super) fn of(types: u8) -> Rules {
        Rules { types, additional: Some(ANY), max_items: u32::MAX, max_length: u32::MAX, ..NO_RULES.clone() }
    }

    /// The required properties, as bits of the list.
    pub fn required(&self) -> u64 {
        self.properties.iter().enumerate().filter(|(_, p)| p.required).fold(0, |m, (i, _)| m | 1 << i)
    }

    /// The properties a key may still name, as bits, when `seen` are
    /// written.
    pub fn open(&self, seen: u64) -> u64 {
        let unseen = (0..self.properties.len()).filter(|&i| seen & 1 << i == 0).fold(0u64, |m, i| m | 1 << i);
        if self.ordered {
            unseen & unseen.wrapping_neg()
        } else {
            unseen
        }
    }
}

/// What a value must be.
#[derive(Clone, Debug)]
pub(super) enum Node {
    /// Values of the types in its rules, each held to them.
    Typed(Rules),
    /// One of these JSON texts, written compactly.
    Literals(Vec<Vec<u8>>),
    /// A value any of these accepts (once linked, none of them is an
    /// `AnyOf`: nested ones are flattened into one list).
    AnyOf(Vec<NodeId>),
    /// A `$ref`: the same values as the node it names (only while
    /// compiling: linking points every reference at its target).
    Alias(NodeId),
    /// A `$ref` whose target is not compiled yet.
    Pending,
}

/// A schema that cannot be served.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SchemaError {
    /// A keyword (or a form of one) decoding cannot be held to.
    #[error("{path}: `{keyword}` is not supported in constrained decoding")]
    Unsupported {
        /// Where in the schema, as a JSON pointer.
        path: String,
        /// The keyword.
        keyword: String,
    },
    /// Not a JSON Schema (a keyword of the wrong type, an unknown type…).
    #[error("{path}: {reason}")]
    Invalid {
        /// Where in the schema, as a JSON pointer.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

/// A compiled JSON Schema.
#[derive(Clone, Debug)]
pub struct Schema {
    pub(super) nodes: Vec<Node>,
    pub(super) root: NodeId,
    /// Per node, the fewest levels of containers a value of it needs (a
    /// string 0, `{}` 1, an object with a required object 2), or more than
    /// [`MAX_DEPTH`] when none fits within it (see `schema_link.rs`).
    pub(super) min_depth: Vec<u8>,
}

pub(super) fn invalid(path: &str, reason: impl Into<String>) -> SchemaError {
    SchemaError::Invalid { path: if path.is_empty() { "/".into() } else { path.into() }, reason: reason.into() }
}

pub(super) fn unsupported(path: &str, keyword: &str) -> SchemaError {
    SchemaError::Unsupported { path: if path.is_empty() { "/".into() } else { path.into() }, keyword: keyword.into() }
}
