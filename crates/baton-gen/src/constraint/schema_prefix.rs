//! A JSON text read one byte at a time against a [`Schema`]: whether the
//! bytes so far can still begin a text the schema accepts, and whether they
//! already are one.
//!
//! Where the schema offers a choice (`anyOf`, a value of several types),
//! the reader follows every branch the bytes allow at once: its state is a
//! set of paths, each a stack of containers and a position in the grammar,
//! and a byte keeps the paths it continues. Equal paths are merged; past
//! [`MAX_PATHS`] the later ones are dropped, which only narrows what may
//! follow (every text the reader accepts still fits the schema).

use std::sync::Arc;

use super::json::{is_space, Num};
use super::schema::{types, Node, NodeId, Rules, Schema, NO_RULES};

/// Most branches followed at once.
pub const MAX_PATHS: usize = 64;

/// Most spaces or tabs after a newline between tokens of the text. The
/// whitespace between two tokens is nothing, one space, or a newline and
/// an indent of at most this many (as llama.cpp's JSON grammars allow): a
/// small model cannot spend its tokens on blank lines.
pub const MAX_INDENT: u8 = 20;

/// Most digits of a number's exponent.
pub const MAX_EXPONENT_DIGITS: u8 = 2;

/// Most digits of a number's integer part, as llama.cpp's JSON grammars
/// allow (a small model otherwise writes digits until it runs out of
/// tokens). With at most [`MAX_EXPONENT_DIGITS`] of exponent, every number
/// read is below 10^115, finite as a double.
pub const MAX_INTEGER_DIGITS: u16 = 16;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Frame {
    /// `seen`: the properties written, as bits of the schema's list.
    Object { node: NodeId, seen: u64 },
    /// `count`: the items begun.
    Array { node: NodeId, count: u32 },
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    /// A value of `node` (or, `first_in_array`, the closing bracket).
    Value {
        node: NodeId,
        first_in_array: bool,
    },
    /// The opening quote of a key (or, `first`, the closing brace).
    Key {
        first: bool,
    },
    /// Inside a key: its bytes so far (escapes are not written in keys).
    KeyText(Vec<u8>),
    /// The colon before a value of `value`.
    Colon {
        value: NodeId,
    },
    /// A comma or the container's closing bracket.
    AfterValue,
    /// Inside a string value of `node`: `chars` characters so far; after a
    /// backslash (`escape`); `hex` digits of a `\u` escape still to come
    /// (`high`: it began with `d`); `utf8`: the continuation bytes of a
    /// character still to come, and the range the next one must be in.
    Str {
        node: NodeId,
        chars: u32,
        escape: bool,
        hex: u8,
        high: bool,
        utf8: (u8, u8, u8),
    },
    /// `digits`: of the integer part so far; `exponent`: of the
    /// exponent so far.
    Number {
        num: Num,
        integer: bool,
        digits: u16,
        exponent: u8,
    },
    Literal {
        rest: &'static [u8],
    },
    /// One of the node's literals: the bytes of it so far.
    Literals {
        node: NodeId,
        text: Vec<u8>,
    },
    Done,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Path {
    stack: Vec<Frame>,
    state: State,
    gap: u8,
}

/// The bytes of a JSON text so far, as far as they decide it against a
/// schema.
#[derive(Clone, Debug)]
pub struct SchemaPrefix {
    schema: Arc<Schema>,
    paths: Vec<Path>,
}

impl SchemaPrefix {
    /// The start of a text `schema` must accept.
    pub fn new(schema: Arc<Schema>) -> SchemaPrefix {
        let root = schema.root;
        SchemaPrefix {
            schema,
            paths: vec![Path { stack: Vec::new(), state: State::Value { node: root, first_in_array: false }, gap: 0 }],
        }
    }

    /// The schema it reads against.
    pub fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    /// Whether the bytes so far are a whole text the schema accepts.
    pub fn is_complete(&self) -> bool {
        self.paths.iter().any(|p| p.is_complete(&self.schema))
    }

    /// Takes `bytes`; `false` when they cannot continue an accepted text
    /// (the prefix is then spent: callers try bytes on a clone).
    pub fn push_all(&mut self, bytes: &[u8]) -> bool {
        bytes.iter().all(|&b| self.push(b))
    }

    /// Takes one byte; `false` when it cannot continue an accepted text.
    pub fn push(&mut self, b: u8) -> bool {
        let paths = std::mem::take(&mut self.paths);
        let mut next = Vec::with_capacity(paths.len());
        for path in paths {
            path.step(b, &self.schema, &mut next);
        }
        if next.len() > 1 {
            let mut merged: Vec<Path> = Vec::with_capacity(next.len());
            for path in next {
                if merged.len() < MAX_PATHS && !merged.contains(&path) {
                    merged.push(path);
                }
            }
            next = merged;
        }
        self.paths = next;
        !self.paths.is_empty()
    }
}

/// Whether a key's bytes are (`whole`) or begin a name besides the
/// declared ones: well-formed UTF-8 without escapes or control characters.
fn other_name(key: &[u8], whole: bool) -> bool {
    let plain = !key.iter().any(|&c| c == b'\\' || c < 0x20);
    plain
        && match std::str::from_utf8(key) {
            Ok(_) => true,
            // Cut short in a character is a start; a wrong byte is not.
            Err(e) => !whole && e.error_len().is_none(),
        }
}

fn literals(schema: &Schema, node: NodeId) -> &[Vec<u8>] {
    match &schema.nodes[node as usize] {
        Node::Literals(list) => list,
        _ => &[],
    }
}

/// The rules of a node (none for a node that is not typed).
fn rules(schema: &Schema, node: NodeId) -> &Rules {
    match &schema.nodes[node as usize] {
        Node::Typed(rules) => rules,
        _ => &NO_RULES,
    }
}

impl Path {
    fn is_complete(&self, schema: &Schema) -> bool {
        match &self.state {
            State::Done => true,
            State::Number { num, .. } => self.stack.is_empty() && num.can_end(),
            State::Literals { node, text } => self.stack.is_empty() && literals(schema, *node).contains(text),
            _ => false,
        }
    }

    fn after_value(&self) -> State {
        if self.stack.is_empty() {
            State::Done
        } else {
            State::AfterValue
        }
    }

    fn step(mut self, b: u8, schema: &Schema, out: &mut Vec<Path>) {
        match &mut self.state {
            State::Str { .. } => {
                if self.string(b, schema) {
                    out.push(self);
                }
                return;
            }
            State::KeyText(_) => {
                if self.key_byte(b, schema) {
                    out.push(self);
                }
                return;
            }
            State::Literal { rest } => {
                let rest: &'static [u8] = rest;
                if rest.first() == Some(&b) {
                    self.state = if rest.len() == 1 { self.after_value() } else { State::Literal { rest: &rest[1..] } };
                    out.push(self);
                }
                return;
            }
            State::Number { num, integer, digits, exponent } => {
                let next = num.next(b).filter(|n| !*integer || !matches!(n, Num::Dot | Num::E));
                if let Some(next) = next {
                    *num = next;
                    *digits += u16::from(matches!(next, Num::Zero | Num::Int));
                    *exponent += u8::from(next == Num::Exp);
                    if *exponent <= MAX_EXPONENT_DIGITS && *digits <= MAX_INTEGER_DIGITS {
                        out.push(self);
                    }
                    return;
                }
                if !num.can_end() {
                    return;
                }
                // The byte ends the number and belongs to what follows.
                self.state = self.after_value();
            }
            State::Literals { node, text } => {
                let list = literals(schema, *node);
                text.push(b);
                if list.iter().any(|l| l.starts_with(text)) {
                    out.push(self);
                    return;
                }
                text.pop();
                if !list.contains(text) {
                    return;
                }
                self.state = self.after_value();
            }
            _ => {}
        }
        if is_space(b) {
            // `gap`: 0 before any whitespace, 1 after one space, 2 + n
            // after a newline and n spaces or tabs.
            let next = match (self.gap, b) {
                (0, b' ') => 1,
                (0, b'\n') => 2,
                (g, b' ' | b'\t') if (2..2 + MAX_INDENT).contains(&g) => g + 1,
                _ => return,
            };
            if self.state != State::Done {
                self.gap = next;
                out.push(self);
            }
            return;
        }
        self.gap = 0;
        match std::mem::replace(&mut self.state, State::Done) {
            State::Value { first_in_array: true, .. } if b == b']' => {
                let closed = self.close_array(schema);
                self.keep_if(closed, out);
            }
            State::Value { node, .. } => self.start(node, b, schema, out),
            State::Key { first } => match b {
                b'"' if self.key_can_start(schema) => {
                    self.state = State::KeyText(Vec::new());
                    out.push(self);
                }
                b'}' if first => {
                    let closed = self.close_object(schema);
                    self.keep_if(closed, out);
                }
                _ => {}
            },
            State::Colon { value } if b == b':' => {
                self.state = State::Value { node: value, first_in_array: false };
                out.push(self);
            }
            State::AfterValue => {
                let ok = match (self.stack.last(), b) {
                    (Some(Frame::Object { .. }), b',') => {
                        self.state = State::Key { first: false };
                        self.key_can_start(schema)
                    }
                    (Some(&Frame::Array { node, count }), b',') => {
                        self.state = State::Value { node: rules(schema, node).items, first_in_array: false };
                        count < rules(schema, node).max_items
                    }
                    (Some(Frame::Object { .. }), b'}') => self.close_object(schema),
                    (Some(Frame::Array { .. }), b']') => self.close_array(schema),
                    _ => false,
                };
                if ok {
                    out.push(self);
                }
            }
            _ => {}
        }
    }

    /// The first byte of a value of `node`.
    fn start(mut self, node: NodeId, b: u8, schema: &Schema, out: &mut Vec<Path>) {
        if let Some(Frame::Array { node: array, count }) = self.stack.last_mut() {
            *count += 1;
            if *count > rules(schema, *array).max_items {
                return;
            }
        }
        match &schema.nodes[node as usize] {
            // Flattened when linked: each alternative is a value's node.
            Node::AnyOf(alternatives) => {
                for &alternative in alternatives {
                    self.clone().start_one(alternative, b, schema, out);
                }
            }
            _ => self.start_one(node, b, schema, out),
        }
    }

    /// The first byte of a value of `node`, which is not an `anyOf`.
    fn start_one(mut self, node: NodeId, b: u8, schema: &Schema, out: &mut Vec<Path>) {
        match &schema.nodes[node as usize] {
            Node::Literals(list) => {
                if list.iter().any(|l| l.first() == Some(&b)) {
                    self.state = State::Literals { node, text: vec![b] };
                    out.push(self);
                }
            }
            Node::AnyOf(_) | Node::Alias(_) | Node::Pending => {}
            Node::Typed(r) => {
                let has = |t: u8| r.types & t != 0;
                let open = self.stack.len();
                self.state = match b {
                    b'{' if has(types::OBJECT) && schema.object_fits(r, open) => {
                        self.stack.push(Frame::Object { node, seen: 0 });
                        State::Key { first: true }
                    }
                    b'[' if has(types::ARRAY) && schema.array_fits(r, open) => {
                        self.stack.push(Frame::Array { node, count: 0 });
                        State::Value { node: r.items, first_in_array: true }
                    }
                    b'"' if has(types::STRING) => {
                        State::Str { node, chars: 0, escape: false, hex: 0, high: false, utf8: (0, 0, 0) }
                    }
                    b'-' | b'0'..=b'9' if has(types::NUMBER | types::INTEGER) => {
                        let integer = !has(types::NUMBER);
                        let num = match b {
                            b'-' => Num::Minus,
                            b'0' => Num::Zero,
                            _ => Num::Int,
                        };
                        State::Number { num, integer, digits: u16::from(b != b'-'), exponent: 0 }
                    }
                    b't' if has(types::BOOLEAN) => State::Literal { rest: b"rue" },
                    b'f' if has(types::BOOLEAN) => State::Literal { rest: b"alse" },
                    b'n' if has(types::NULL) => State::Literal { rest: b"ull" },
                    _ => return,
                };
                out.push(self);
            }
        }
    }

    /// Whether the object open at the top of the stack can take another
    /// key: one of its properties not written yet, or any other name, whose
    /// value still fits within the nesting allowed.
    fn key_can_start(&self, schema: &Schema) -> bool {
        let Some(&Frame::Object { node, seen }) = self.stack.last() else { return false };
        let r = rules(schema, node);
        let open = self.stack.len();
        let unseen = r.open(seen);
        !r.ordered && r.additional.is_some_and(|a| schema.fits(a, open))
            || r.properties.iter().enumerate().any(|(i, p)| unseen & 1 << i != 0 && schema.fits(p.node, open))
    }

    /// Keeps the path when `ok`.
    fn keep_if(self, ok: bool, out: &mut Vec<Path>) {
        if ok {
            out.push(self);
        }
    }

    fn close_object(&mut self, schema: &Schema) -> bool {
        let Some(Frame::Object { node, seen }) = self.stack.pop() else { return false };
        let r = rules(schema, node);
        self.state = self.after_value();
        seen & r.required() == r.required()
    }

    fn close_array(&mut self, schema: &Schema) -> bool {
        let Some(Frame::Array { node, count }) = self.stack.pop() else { return false };
        self.state = self.after_value();
        count >= rules(schema, node).min_items
    }

    fn key_byte(&mut self, b: u8, schema: &Schema) -> bool {
        let Some(&Frame::Object { node, seen }) = self.stack.last() else { return false };
        let open = self.stack.len();
        let r = rules(schema, node);
        let State::KeyText(key) = &mut self.state else { return false };
        let unseen = r.open(seen);
        let named = |i: usize| unseen & 1 << i != 0 && schema.fits(r.properties[i].node, open);
        // A quote after an odd run of backslashes is part of the key.
        let escaped = key.iter().rev().take_while(|&&c| c == b'\\').count() % 2 == 1;
        if b == b'"' && !escaped {
            let found = r.properties.iter().position(|p| p.key == *key);
            let value = match found {
                Some(i) if named(i) => {
                    if let Some(Frame::Object { seen, .. }) = self.stack.last_mut() {
                        *seen |= 1 << i;
                    }
                    r.properties[i].node
                }
                // A declared name again, or out of its order.
                Some(_) => return false,
                None if r.ordered => return false,
                None => match r.additional {
                    Some(node) if schema.fits(node, open) && other_name(key, true) => node,
                    _ => return false,
                },
            };
            self.state = State::Colon { value };
            return true;
        }
        key.push(b);
        // A declared name is written as it is compactly (with the escapes
        // its characters need); any other name without escapes or control
        // characters.
        let other = !r.ordered && r.additional.is_some_and(|a| schema.fits(a, open)) && other_name(key, false);
        other || r.properties.iter().enumerate().any(|(i, p)| named(i) && p.key.starts_with(key))
    }

    fn string(&mut self, b: u8, schema: &Schema) -> bool {
        let State::Str { node, chars, escape, hex, high, utf8 } = &mut self.state else { return false };
        let r = rules(schema, *node);
        if *hex > 0 {
            // A `\u` escape of a surrogate would count as two characters
            // where the schema counts one: refused after its second digit.
            match (*hex, b) {
                (4, b'd' | b'D') => *high = true,
                (3, b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F') if *high => return false,
                _ if !b.is_ascii_hexdigit() => return false,
                _ => {}
            }
            *hex -= 1;
            return true;
        }
        if *escape {
            *escape = false;
            *high = false;
            match b {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                b'u' => *hex = 4,
                _ => return false,
            }
            return true;
        }
        if utf8.0 > 0 {
            // Well-formed UTF-8 only (RFC 3629: no overlong forms, no
            // surrogates, nothing past U+10FFFF).
            if !(utf8.1..=utf8.2).contains(&b) {
                return false;
            }
            *utf8 = (utf8.0 - 1, 0x80, 0xbf);
            return true;
        }
        match b {
            b'"' => {
                if *chars < r.min_length {
                    return false;
                }
                self.state = self.after_value();
                true
            }
            0x00..=0x1f | 0x80..=0xc1 | 0xf5..=0xff => false,
            _ => {
                *utf8 = match b {
                    0xc2..=0xdf => (1, 0x80, 0xbf),
                    0xe0 => (2, 0xa0, 0xbf),
                    0xed => (2, 0x80, 0x9f),
                    0xe1..=0xef => (2, 0x80, 0xbf),
                    0xf0 => (3, 0x90, 0xbf),
                    0xf4 => (3, 0x80, 0x8f),
                    0xf1..=0xf3 => (3, 0x80, 0xbf),
                    _ => (0, 0, 0),
                };
                *chars += 1;
                *escape = b == b'\\';
                *chars <= r.max_length
            }
        }
    }
}
