//! Tool calls in the XML form (Qwen 3.5 and 3.6, Qwen3-Coder; see
//! [`xml_values`](super::xml_values)) as a grammar for llguidance:
//! `<tool_call>\n<function=NAME>\n` then one block per argument,
//! `<parameter=KEY>\nVALUE\n</parameter>\n`, then `</function>`.
//!
//! Each tool's arguments are held to its parameters' schema as far as the
//! form carries it: the object's `properties` (in the order of their
//! names, as Baton declares them to the model) with its `required` ones
//! present and no others; each value by its schema: `const` and `enum`
//! (a string as its text, anything else as JSON), `integer` and `number`
//! (at most 16 integer digits and 3 exponent digits, as JSON schemas'
//! unbounded numbers), `boolean`, `null`, and `object` and `array` as
//! JSON held to their schema (`%json`, as `response_format`'s). A string,
//! or a value whose schema says no single type, is any text that does not
//! hold `</parameter>`. A schema without `properties` takes any
//! parameters, each any text.
//!
//! What the grammar holds, by [`CallShape`]: one call, or several
//! ([`MAX_CALLS`] at most) each in its `<tool_call>` tags; starting inside
//! the first call after its `<tool_call>` and newline (a required call:
//! the prompt ends with them), or with the tag after any whitespace
//! (`"auto"`).

use serde_json::Value;

use super::grammar::GrammarSource;
use super::json_defaults::with_defaults;
use super::lark_rules::LarkRules;
use super::tags::{
    TOOL_CALL_CLOSE, TOOL_CALL_OPEN, XML_FUNCTION_CLOSE, XML_FUNCTION_OPEN, XML_PARAMETER_CLOSE, XML_PARAMETER_OPEN,
};
use super::tool_grammar::{literal, CallShape, MAX_CALLS};

/// The grammar's rules, with its value rules (below).
struct Rules(LarkRules);

impl Rules {
    /// The expression of a value of `schema` and the closing of its block
    /// (`\n</parameter>\n`): a string's lexeme holds its closing tag, so
    /// that the text's end is where the tag is.
    fn value(&mut self, schema: &Value) -> String {
        let close = literal(&format!("\n{XML_PARAMETER_CLOSE}\n"));
        let text = |v: &Value| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let Some(map) = schema.as_object() else { return r#"TEXT "\n""#.to_string() };
        if let Some(value) = map.get("const") {
            return format!("{} {close}", literal(&text(value)));
        }
        if let Some(Value::Array(values)) = map.get("enum") {
            let alternatives: Vec<String> = values.iter().map(|v| literal(&text(v))).collect();
            if !alternatives.is_empty() {
                return format!("({}) {close}", alternatives.join(" | "));
            }
        }
        let kind = match map.get("type") {
            Some(Value::String(kind)) => kind.as_str(),
            _ if map.contains_key("properties") => "object",
            _ if map.contains_key("items") => "array",
            _ => "",
        };
        match kind {
            "integer" => format!("INTEGER {close}"),
            "number" => format!("NUMBER {close}"),
            "boolean" => format!(r#"("true" | "false") {close}"#),
            "null" => format!(r#""null" {close}"#),
            "object" | "array" => {
                let json = self.0.rule(&format!("%json {}", with_defaults(schema)));
                format!("{json} {close}")
            }
            _ => r#"TEXT "\n""#.to_string(),
        }
    }

    /// The expression of the parameter blocks of `parameters` (a
    /// function's parameters' schema).
    fn parameters(&mut self, parameters: &Value) -> String {
        let Some(properties) = parameters.get("properties").and_then(Value::as_object) else {
            return "anyblock*".to_string();
        };
        let required: Vec<&str> = match parameters.get("required") {
            Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let mut names: Vec<&String> = properties.keys().collect();
        names.sort();
        let mut blocks = Vec::new();
        for name in names {
            let open = literal(&format!("{XML_PARAMETER_OPEN}{name}>\n"));
            let value = self.value(&properties[name]);
            let block = self.0.rule(&format!("{open} {value}"));
            blocks.push(match required.contains(&name.as_str()) {
                true => block,
                false => format!("{block}?"),
            });
        }
        match blocks.is_empty() {
            true => r#""""#.to_string(),
            false => blocks.join(" "),
        }
    }
}

/// The grammar of calls to `tools` in the XML form (each its name, which
/// the caller has checked is letters, digits, `_` or `-`, and its
/// parameters' schema), shaped as `shape` says.
pub fn xml_call_grammar<'a>(tools: impl IntoIterator<Item = (&'a str, &'a Value)>, shape: CallShape) -> GrammarSource {
    let (open, close) = (literal(&format!("{TOOL_CALL_OPEN}\n")), literal(TOOL_CALL_CLOSE));
    let start = if shape.opens { format!("LEAD? {open} calls") } else { "calls".to_string() };
    let mut rules = Rules(LarkRules::new("x", &start));
    // After a call: its closing tag (or nothing, the text ending there),
    // then, with several calls, the next one in its tags.
    let after = format!("(GAP? {close} GAP?)?");
    let more = if shape.parallel { MAX_CALLS - 1 } else { 0 };
    let next = format!("(GAP? {close} GAP? {open} call)");
    rules.0.lark += &format!("calls: call{} {after}\n", format!(" {next}?").repeat(more));
    let mut names = Vec::new();
    for (i, (name, parameters)) in tools.into_iter().enumerate() {
        let blocks = rules.parameters(parameters);
        let function = literal(&format!("{XML_FUNCTION_OPEN}{name}>\n"));
        rules.0.lark += &format!("call{i}: {function} {blocks} {}\n", literal(XML_FUNCTION_CLOSE));
        names.push(format!("call{i}"));
    }
    rules.0.choice_of_calls(&names);
    // Any parameter: a name, then any text.
    rules.0.lark += &format!(r#"anyblock: {} KEY ">\n" TEXT "\n""#, literal(XML_PARAMETER_OPEN));
    rules.0.lark += "\nKEY: /[A-Za-z0-9_.\\-]+/\n";
    // Any text up to the first closing tag, the tag included.
    let tag = XML_PARAMETER_CLOSE.replace('/', "\\/");
    rules.0.lark += &format!("TEXT: /(?s:.*)\\n{tag}/ & ~/(?s:.*){tag}(?s:.+)/\n");
    rules.0.finish()
}
