//! Tool calls in the XML form Qwen 3.5 and 3.6 (and Qwen3-Coder) were
//! trained on, written and read:
//!
//! ```text
//! <tool_call>
//! <function=NAME>
//! <parameter=KEY>
//! VALUE
//! </parameter>
//! </function>
//! </tool_call>
//! ```
//!
//! A value is plain text on the lines between its tags: a string as it
//! is (several lines if need be, nothing escaped), a number, `true`,
//! `false` or `null` as JSON writes them, an object or an array as JSON.
//! So a value's text alone does not say its type (`42` may be a string):
//! reading takes it from the parameter's schema, and guesses (JSON if it
//! reads as JSON, else a string) where the schema does not say.

use serde_json::{Map, Value};

use super::tags::{XML_FUNCTION_CLOSE, XML_FUNCTION_OPEN, XML_PARAMETER_CLOSE, XML_PARAMETER_OPEN};

/// A call in the XML form, its `<tool_call>` tags left out: the
/// arguments' members in their order, each a parameter block.
pub fn xml_call(name: &str, arguments: &Value) -> String {
    let mut text = format!("{XML_FUNCTION_OPEN}{name}>\n");
    match arguments {
        Value::Object(members) => {
            for (key, value) in members {
                let value = match value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                text.push_str(&format!("{XML_PARAMETER_OPEN}{key}>\n{value}\n{XML_PARAMETER_CLOSE}\n"));
            }
        }
        // Arguments that are not an object (a client's malformed earlier
        // call): one block, so that nothing is lost.
        other => text.push_str(&format!("{XML_PARAMETER_OPEN}arguments>\n{other}\n{XML_PARAMETER_CLOSE}\n")),
    }
    text.push_str(XML_FUNCTION_CLOSE);
    text
}

/// The JSON Schema type a value of `schema` has, where it says one: its
/// `type` (the first that is not `null` of a list), else that of its
/// `const` or of its `enum`'s values when they agree.
fn schema_type(schema: Option<&Value>) -> Option<&str> {
    let map = schema?.as_object()?;
    match map.get("type") {
        Some(Value::String(kind)) => return Some(kind),
        Some(Value::Array(kinds)) => {
            let kinds: Vec<&str> = kinds.iter().filter_map(Value::as_str).filter(|k| *k != "null").collect();
            return (kinds.len() == 1).then(|| kinds[0]);
        }
        _ => {}
    }
    let of = |v: &Value| match v {
        Value::String(_) => "string",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::Bool(_) => "boolean",
        Value::Null => "null",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    if let Some(value) = map.get("const") {
        return Some(of(value));
    }
    let values = map.get("enum")?.as_array()?;
    let first = of(values.first()?);
    values.iter().all(|v| of(v) == first).then_some(first)
}

/// A parameter's value from its text, typed as its schema says.
pub fn read_xml_value(text: &str, schema: Option<&Value>) -> Value {
    let json = || serde_json::from_str::<Value>(text.trim()).ok();
    let string = || Value::String(text.to_string());
    match schema_type(schema) {
        Some("string") => string(),
        Some("integer" | "number") => json().filter(Value::is_number).unwrap_or_else(string),
        Some("boolean") => json().filter(Value::is_boolean).unwrap_or_else(string),
        Some("null") => json().filter(Value::is_null).unwrap_or_else(string),
        Some("object") => json().filter(Value::is_object).unwrap_or_else(string),
        Some("array") => json().filter(Value::is_array).unwrap_or_else(string),
        // The schema does not say: JSON where the text reads as a JSON
        // value other than a string, the text otherwise.
        _ => json().filter(|v| !v.is_string()).unwrap_or_else(string),
    }
}

/// The call at the start of `text` (after whitespace): its function's
/// name and its arguments, each typed by `parameters` (the function's
/// parameters' schema, when known), and the text after its
/// `</function>`; `None` when no whole call starts there.
pub fn read_xml_call<'t>(text: &'t str, parameters: Option<&Value>) -> Option<(String, Value, &'t str)> {
    let rest = text.trim_start().strip_prefix(XML_FUNCTION_OPEN)?;
    let (name, mut rest) = rest.split_once('>')?;
    let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.';
    if name.is_empty() || !name.chars().all(valid) {
        return None;
    }
    let properties = parameters.and_then(|p| p.get("properties"));
    let mut arguments = Map::new();
    loop {
        let trimmed = rest.trim_start();
        if let Some(after) = trimmed.strip_prefix(XML_FUNCTION_CLOSE) {
            return Some((name.to_string(), Value::Object(arguments), after));
        }
        let (key, after) = trimmed.strip_prefix(XML_PARAMETER_OPEN)?.split_once('>')?;
        let (value, after) = after.split_once(XML_PARAMETER_CLOSE)?;
        // The value's own lines: one newline after the opening tag and one
        // before the closing tag belong to the form.
        let value = value.strip_prefix('\n').unwrap_or(value);
        let value = value.strip_suffix('\n').unwrap_or(value);
        let schema = properties.and_then(|p| p.get(key));
        arguments.insert(key.to_string(), read_xml_value(value, schema));
        rest = after;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn xml_values_are_typed_by_their_schema_and_guessed_without_one() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string"}, "n": {"type": "integer"}, "x": {"type": "number"},
            "ok": {"type": "boolean"}, "tags": {"type": "array"}, "where": {"type": "object"},
            "zone": {"enum": ["UTC", "CET"]}, "maybe": {"type": ["integer", "null"]}}});
        let text = "<function=f>\n<parameter=name>\n42\n</parameter>\n<parameter=n>\n7\n</parameter>\n\
                    <parameter=x>\n-1.5e3\n</parameter>\n<parameter=ok>\nfalse\n</parameter>\n\
                    <parameter=tags>\n[\"a\", 1]\n</parameter>\n<parameter=where>\n{\"lat\": 1}\n</parameter>\n\
                    <parameter=zone>\nCET\n</parameter>\n<parameter=maybe>\n3\n</parameter>\n\
                    <parameter=free>\n12\n</parameter>\n<parameter=words>\ntwo\nlines\n</parameter>\n</function>\n</tool_call>";
        let (name, arguments, rest) = read_xml_call(text, Some(&schema)).expect("a call");
        assert_eq!(name, "f");
        assert_eq!(
            arguments,
            json!({"name": "42", "n": 7, "x": -1.5e3, "ok": false, "tags": ["a", 1], "where": {"lat": 1},
                   "zone": "CET", "maybe": 3, "free": 12, "words": "two\nlines"})
        );
        assert_eq!(rest, "\n</tool_call>");
        // A value that does not read as its type stays text.
        let (_, arguments, _) =
            read_xml_call("<function=f>\n<parameter=n>\nmany\n</parameter>\n</function>", Some(&schema)).expect("call");
        assert_eq!(arguments, json!({"n": "many"}));
    }

    #[test]
    fn an_xml_call_written_reads_back_and_cut_calls_do_not_read() {
        let arguments = json!({"city": "Oslo\nNorway", "days": 3, "where": {"lat": 1.5}, "hot": true});
        let written = xml_call("get_weather", &arguments);
        assert!(written.starts_with("<function=get_weather>\n<parameter="), "{written}");
        let schema = json!({"properties": {"city": {"type": "string"}}});
        let (name, read, rest) = read_xml_call(&written, Some(&schema)).expect("reads back");
        assert_eq!((name.as_str(), &read, rest), ("get_weather", &arguments, ""));
        for cut in
            ["<function=f", "<function=f>\n<parameter=a>\n1\n</param", "<function=f>\n<parameter=a>\n1\n</parameter>\n"]
        {
            assert!(read_xml_call(cut, None).is_none(), "{cut:?}");
        }
        assert!(read_xml_call("<function=bad name>\n</function>", None).is_none());
        assert!(read_xml_call("{\"name\": \"f\"}", None).is_none());
    }
}
