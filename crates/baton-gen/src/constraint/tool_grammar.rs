//! Tool calls as a grammar for llguidance: the Hermes format's calls
//! (`<tool_call>{"name": …, "arguments": {…}}</tool_call>`) written as a
//! Lark grammar whose arguments are each tool's parameter schema, held as
//! `response_format`'s schemas are (`%json`, with the defaults of
//! [`json_defaults`](super::json_defaults): `pattern`, `minimum`, `oneOf`,
//! `format`, `$defs`… as llguidance serves them).
//!
//! A call's object names the tool first, then its arguments; the name is
//! one of the tools offered. Its JSON whitespace is the schemas' (one
//! space, or a newline and at most [`MAX_GRAMMAR_INDENT`](super::MAX_GRAMMAR_INDENT)
//! spaces or tabs). Between tags and objects at most [`MAX_GAP_SPACES`]
//! bytes of whitespace. What the grammar holds, by [`CallShape`]:
//!
//! - one call, the text starting at its object (a required call: the
//!   prompt ends with [`TOOL_CALL_OPEN`]); the text is whole when the
//!   object closes.
//! - several calls (`parallel_tool_calls`), at most [`MAX_CALLS`]: after a
//!   call's object its [`TOOL_CALL_CLOSE`], then the next call's
//!   [`TOOL_CALL_OPEN`]; the text may end after an object or its closing
//!   tag, nowhere else.
//! - either of those opened by [`TOOL_CALL_OPEN`] after any whitespace
//!   (`tool_choice: "auto"`, whose text may also be words: the
//!   [`Constraint`](super::Constraint) reads it freely until the tag opens).

use serde_json::Value;

use super::grammar::GrammarSource;
use super::json_defaults::{with_defaults, MAX_INDENT};
use super::tags::{
    HARMONY_CALL_CHANNEL, HARMONY_CALL_TRIGGERS, HARMONY_CONSTRAIN_JSON, HARMONY_MESSAGE, HARMONY_RECIPIENT,
    TOOL_CALL_CLOSE, TOOL_CALL_OPEN,
};

/// Most calls one answer may hold.
pub const MAX_CALLS: usize = 8;

/// Most whitespace bytes between a tag and what comes before or after it.
pub const MAX_GAP_SPACES: usize = 2;

/// How many calls a text holds, and where it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallShape {
    /// Several calls (at most [`MAX_CALLS`]) rather than one.
    pub parallel: bool,
    /// The text opens the first call with [`TOOL_CALL_OPEN`] itself
    /// (after any whitespace), rather than starting inside it.
    pub opens: bool,
}

/// A Lark string literal of `text` (a JSON string's escapes, which Lark
/// reads alike).
pub(super) fn literal(text: &str) -> String {
    Value::from(text).to_string()
}

/// The grammar of calls to `tools` (each its name, which the caller has
/// checked is letters, digits, `_` or `-`, and its parameters' schema),
/// shaped as `shape` says.
pub fn tool_call_grammar<'a>(tools: impl IntoIterator<Item = (&'a str, &'a Value)>, shape: CallShape) -> GrammarSource {
    let (open, close) = (literal(TOOL_CALL_OPEN), literal(TOOL_CALL_CLOSE));
    let mut lark = String::from("%llguidance {}\n");
    lark += &match shape.opens {
        true => format!("start: LEAD? {open} GAP? calls\n"),
        false => "start: calls\n".to_string(),
    };
    if shape.parallel {
        lark += "calls: call tail1\n";
        for k in 1..MAX_CALLS {
            let next = format!("GAP? {close} GAP? {open} GAP? call tail{}", k + 1);
            lark += &format!("tail{k}: (GAP | GAP? {close} GAP? | {next})?\n");
        }
        lark += &format!("tail{MAX_CALLS}: (GAP | GAP? {close} GAP?)?\n");
    } else {
        lark += "calls: call\n";
    }
    let mut names = Vec::new();
    for (i, (name, parameters)) in tools.into_iter().enumerate() {
        let (key, colon, comma) = (literal("\"name\""), literal(":"), literal(","));
        let quoted = literal(&Value::from(name).to_string());
        lark += &format!(
            "call{i}: \"{{\" WS? {key} WS? {colon} WS? {quoted} WS? {comma} WS? {args} WS? {colon} WS? arguments{i} WS? \"}}\"\n",
            args = literal("\"arguments\""),
        );
        lark += &format!("arguments{i}: %json {}\n", with_defaults(parameters));
        names.push(format!("call{i}"));
    }
    lark += &format!("call: {}\n", names.join(" | "));
    lark += &format!("WS: /(?: |\\n[ \\t]{{0,{MAX_INDENT}}})/\n");
    lark += &format!("GAP: /[ \\t\\r\\n]{{1,{MAX_GAP_SPACES}}}/\n");
    lark += "LEAD: /[ \\t\\r\\n]+/\n";
    GrammarSource::Lark(lark)
}

/// The grammar of one call to `tools` in gpt-oss's harmony format, from
/// its recipient on (the prompt ends with the commentary channel's
/// header): `to=functions.NAME <|constrain|>json<|message|>` and the
/// arguments, held to the tool's parameters as [`tool_call_grammar`]
/// holds them. The call's `<|call|>` is the model's end of generation,
/// which the text may take once the arguments close. The markers are
/// matched as text: the tokenizer renders harmony's as text (the
/// vocabulary gives them their bytes), so a marker token or its bytes
/// both fit.
pub fn harmony_call_grammar<'a>(tools: impl IntoIterator<Item = (&'a str, &'a Value)>) -> GrammarSource {
    let mut lark = String::from("%llguidance {}\nstart: call\n");
    let header = literal(&format!("{HARMONY_CONSTRAIN_JSON}{HARMONY_MESSAGE}"));
    let mut names = Vec::new();
    for (i, (name, parameters)) in tools.into_iter().enumerate() {
        let recipient = literal(&format!("{HARMONY_RECIPIENT}{name}"));
        lark += &format!("call{i}: {recipient} {header} arguments{i}\n");
        lark += &format!("arguments{i}: %json {}\n", with_defaults(parameters));
        names.push(format!("call{i}"));
    }
    lark += &format!("call: {}\n", names.join(" | "));
    GrammarSource::Lark(lark)
}

/// The grammar of one harmony call to `tools` that starts anywhere in an
/// answer, from one of [`HARMONY_CALL_TRIGGERS`] on (held by
/// [`Constraint::triggered`](super::Constraint::triggered), `tool_choice:
/// "auto"`): on the commentary channel,
/// `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>`,
/// or with the recipient in the role's header,
/// `<|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>`
/// (its content type `json` or `<|constrain|>json`); then the arguments, as
/// [`harmony_call_grammar`] holds them.
pub fn harmony_lazy_call_grammar<'a>(tools: impl IntoIterator<Item = (&'a str, &'a Value)>) -> GrammarSource {
    let [channel, header] = HARMONY_CALL_TRIGGERS.map(literal);
    let mut lark = String::from("%llguidance {}\nstart: call\n");
    let after_channel = literal(&format!("{HARMONY_CONSTRAIN_JSON}{HARMONY_MESSAGE}"));
    let after_header = format!(
        "{} ({} | {}) {}",
        literal(HARMONY_CALL_CHANNEL.trim_end()),
        literal(" json"),
        literal(HARMONY_CONSTRAIN_JSON),
        literal(HARMONY_MESSAGE)
    );
    let mut names = Vec::new();
    for (i, (name, parameters)) in tools.into_iter().enumerate() {
        let name = literal(name);
        lark += &format!("call{i}: ({channel} {name} {after_channel} | {header} {name} {after_header}) arguments{i}\n");
        lark += &format!("arguments{i}: %json {}\n", with_defaults(parameters));
        names.push(format!("call{i}"));
    }
    lark += &format!("call: {}\n", names.join(" | "));
    GrammarSource::Lark(lark)
}
