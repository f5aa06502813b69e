//! Tool calls in Gemma 4's format as a grammar for llguidance:
//! `<|tool_call>call:NAME{key:value,…}<tool_call|>`, whose arguments are
//! not JSON but Gemma's own values (see [`gemma4_value`]): keys bare,
//! strings between two `<|"|>` markers with nothing escaped, numbers, `true`,
//! `false` and `null` as JSON writes them, `{…}` and `[…]` with commas
//! and no spaces.
//!
//! Each tool's arguments are held to its parameters' schema as far as
//! Gemma's values carry it: `type` (one or a list), `enum`, `const`,
//! `anyOf`/`oneOf`, an object's `properties` (written in the order of
//! their names, as Gemma 4's template writes earlier calls) with its
//! `required` ones present and no others, and an array's `items`;
//! numbers' integer parts have at most 16 digits, as JSON schemas'
//! unbounded ones. A
//! schema that says none of those (or only keywords beyond them:
//! `pattern`, `minimum`, `$ref`…) takes any value of its type, or any
//! value. A string may not hold
//! `<|` (a marker's start) nor end with `<`.
//!
//! What the grammar holds, by [`CallShape`]: one call, or several
//! ([`MAX_CALLS`] at most) one after another, each in its tags; starting
//! after the first call's [`GEMMA4_CALL_OPEN`] (a required call: the
//! prompt ends with it), or with it after any whitespace (`"auto"`).

use serde_json::Value;

use super::gemma4_values::gemma4_value;
use super::grammar::GrammarSource;
use super::lark_rules::LarkRules;
use super::tags::{GEMMA4_CALL_CLOSE, GEMMA4_CALL_NAME, GEMMA4_CALL_OPEN};
use super::tool_grammar::{literal, CallShape, MAX_CALLS};

/// The rules of any Gemma 4 value, and its terminals.
const ANY_VALUE: &str = r#"gvalue: STRING | gdict | garray | NUMBER | "true" | "false" | "null"
gdict: "{" (gkv ("," gkv)*)? "}"
gkv: KEY ":" gvalue
garray: "[" (gvalue ("," gvalue)*)? "]"
KEY: /[A-Za-z0-9_.\-]+/
STRING: /<\|"\|>([^<]|<[^|])*<\|"\|>/
"#;

/// The grammar's rules, with its value rules (below).
struct Rules(LarkRules);

impl Rules {
    /// The expression of a value `schema` holds.
    fn value(&mut self, schema: &Value) -> String {
        let Some(map) = schema.as_object() else { return "gvalue".to_string() };
        if let Some(value) = map.get("const") {
            return literal(&gemma4_value(value));
        }
        if let Some(Value::Array(values)) = map.get("enum") {
            let alternatives: Vec<String> = values.iter().map(|v| literal(&gemma4_value(v))).collect();
            if !alternatives.is_empty() {
                return format!("({})", alternatives.join(" | "));
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(schemas)) = map.get(key) {
                let alternatives: Vec<String> = schemas.iter().map(|s| self.value(s)).collect();
                if !alternatives.is_empty() {
                    return self.0.rule(&alternatives.join(" | "));
                }
            }
        }
        match map.get("type") {
            Some(Value::String(kind)) => self.typed(kind, map),
            Some(Value::Array(kinds)) => {
                let alternatives: Vec<String> =
                    kinds.iter().filter_map(Value::as_str).map(|kind| self.typed(kind, map)).collect();
                self.0.rule(&alternatives.join(" | "))
            }
            _ if map.contains_key("properties") => self.typed("object", map),
            _ if map.contains_key("items") => self.typed("array", map),
            _ => "gvalue".to_string(),
        }
    }

    /// The expression of a value of JSON Schema type `kind`.
    fn typed(&mut self, kind: &str, map: &serde_json::Map<String, Value>) -> String {
        match kind {
            "string" => "STRING".to_string(),
            "integer" => "INTEGER".to_string(),
            "number" => "NUMBER".to_string(),
            "boolean" => r#"("true" | "false")"#.to_string(),
            "null" => r#""null""#.to_string(),
            "array" => match map.get("items") {
                Some(items) => {
                    let item = self.value(items);
                    self.0.rule(&format!(r#""[" ({item} ("," {item})*)? "]""#))
                }
                None => "garray".to_string(),
            },
            "object" => match map.get("properties").and_then(Value::as_object) {
                Some(properties) => {
                    let required: Vec<&str> = match map.get("required") {
                        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
                        _ => Vec::new(),
                    };
                    let mut names: Vec<&String> = properties.keys().collect();
                    names.sort();
                    let members: Vec<(String, bool)> = names
                        .iter()
                        .map(|name| {
                            let value = self.value(&properties[*name]);
                            (format!("{} {value}", literal(&format!("{name}:"))), required.contains(&name.as_str()))
                        })
                        .collect();
                    self.0.rule(&object_body(&members))
                }
                None => "gdict".to_string(),
            },
            _ => "gvalue".to_string(),
        }
    }
}

/// An object of `members` (each a `key:value` expression and whether it
/// is required), in their order: the alternatives by the first member
/// written (any optional ones before it left out), each followed by the
/// others, the optional ones each with `?`.
fn object_body(members: &[(String, bool)]) -> String {
    let rest = |from: usize| -> String {
        members[from..]
            .iter()
            .map(|(member, required)| match required {
                true => format!(r#" "," {member}"#),
                false => format!(r#" ("," {member})?"#),
            })
            .collect()
    };
    let mut alternatives = Vec::new();
    for (i, (member, required)) in members.iter().enumerate() {
        alternatives.push(format!("{member}{}", rest(i + 1)));
        if *required {
            break;
        }
    }
    let all_optional = members.iter().all(|(_, required)| !required);
    match (alternatives.is_empty(), all_optional) {
        (true, _) => r#""{" "}""#.to_string(),
        (false, true) => format!(r#""{{" ({})? "}}""#, alternatives.join(" | ")),
        (false, false) => format!(r#""{{" ({}) "}}""#, alternatives.join(" | ")),
    }
}

/// The grammar of calls to `tools` in Gemma 4's format (each its name,
/// which the caller has checked is letters, digits, `_` or `-`, and its
/// parameters' schema), shaped as `shape` says.
pub fn gemma4_call_grammar<'a>(
    tools: impl IntoIterator<Item = (&'a str, &'a Value)>,
    shape: CallShape,
) -> GrammarSource {
    let (open, close) = (literal(GEMMA4_CALL_OPEN), literal(GEMMA4_CALL_CLOSE));
    let start = if shape.opens { format!("LEAD? {open} calls") } else { "calls".to_string() };
    let mut rules = Rules(LarkRules::new("v", &start));
    let more = if shape.parallel { MAX_CALLS - 1 } else { 0 };
    let next = format!("(GAP? {open} call)");
    rules.0.lark += &format!("calls: call{}\n", format!(" {next}?").repeat(more));
    let mut names = Vec::new();
    for (i, (name, parameters)) in tools.into_iter().enumerate() {
        // The arguments are an object: a schema that does not say which
        // takes any.
        let arguments = match parameters.as_object() {
            Some(map) if map.contains_key("type") || map.contains_key("properties") => rules.value(parameters),
            _ => "gdict".to_string(),
        };
        let named = literal(&format!("{GEMMA4_CALL_NAME}{name}"));
        rules.0.lark += &format!("call{i}: {named} {arguments} {close}\n");
        names.push(format!("call{i}"));
    }
    rules.0.choice_of_calls(&names);
    rules.0.lark += ANY_VALUE;
    rules.0.finish()
}
