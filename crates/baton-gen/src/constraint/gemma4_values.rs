//! Gemma 4's argument values, written and read: keys bare, strings
//! between two [`GEMMA4_QUOTE`] markers with nothing escaped, numbers,
//! `true`, `false` and `null` as JSON writes them, `{key:value,…}` and
//! `[value,…]`. A call is `<|tool_call>call:NAME{…}<tool_call|>`.

use serde_json::{Map, Value};

use super::tags::{GEMMA4_CALL_CLOSE, GEMMA4_CALL_NAME, GEMMA4_CALL_OPEN, GEMMA4_QUOTE};

/// A value in Gemma 4's syntax (an object's keys in the order of their
/// names, as Gemma 4's template writes them).
pub fn gemma4_value(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{GEMMA4_QUOTE}{s}{GEMMA4_QUOTE}"),
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let members: Vec<String> = keys.iter().map(|k| format!("{k}:{}", gemma4_value(&map[*k]))).collect();
            format!("{{{}}}", members.join(","))
        }
        Value::Array(items) => format!("[{}]", items.iter().map(gemma4_value).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

/// A call in Gemma 4's format, its tags included.
pub fn gemma4_call(name: &str, arguments: &Value) -> String {
    format!("{GEMMA4_CALL_OPEN}{GEMMA4_CALL_NAME}{name}{}{GEMMA4_CALL_CLOSE}", gemma4_value(arguments))
}

/// The value at the start of `text` (after whitespace), and the text
/// after it; `None` when no whole value starts there.
pub fn read_gemma4_value(text: &str) -> Option<(Value, &str)> {
    let text = text.trim_start();
    if let Some(rest) = text.strip_prefix(GEMMA4_QUOTE) {
        let (string, rest) = rest.split_once(GEMMA4_QUOTE)?;
        return Some((Value::String(string.to_string()), rest));
    }
    if let Some(rest) = text.strip_prefix('{') {
        let member = |text| {
            let (key, after) = read_key(text)?;
            let (value, after) = read_gemma4_value(after.trim_start().strip_prefix(':')?)?;
            Some(((key, value), after))
        };
        let (members, rest) = read_members(rest, '}', member)?;
        return Some((Value::Object(members.into_iter().collect::<Map<_, _>>()), rest));
    }
    if let Some(rest) = text.strip_prefix('[') {
        let (items, rest) = read_members(rest, ']', read_gemma4_value)?;
        return Some((Value::Array(items), rest));
    }
    // A number, `true`, `false` or `null`: up to what ends a value.
    let end = text.find([',', '}', ']']).unwrap_or(text.len());
    let scalar = text[..end].trim_end();
    match serde_json::from_str::<Value>(scalar).ok()? {
        // `-0`, an integer as written (the grammar lets an integer be
        // one), which serde_json reads as the float -0.0: read as 0, so
        // that it stays an integer.
        Value::Number(_) if scalar == "-0" => Some((Value::from(0), &text[end..])),
        value @ (Value::Number(_) | Value::Bool(_) | Value::Null) => Some((value, &text[end..])),
        _ => None,
    }
}

/// The members of an object or array after its opening, each read by
/// `member` and followed by `,` or the closing `close`; the text after
/// the closing.
fn read_members<'a, T>(
    mut rest: &'a str,
    close: char,
    member: impl Fn(&'a str) -> Option<(T, &'a str)>,
) -> Option<(Vec<T>, &'a str)> {
    let mut members = Vec::new();
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix(close) {
            return Some((members, after));
        }
        if !members.is_empty() {
            rest = rest.strip_prefix(',')?.trim_start();
        }
        let (read, after) = member(rest)?;
        members.push(read);
        rest = after;
    }
}

/// An object's key (bare, or quoted), and the text after it.
fn read_key(text: &str) -> Option<(String, &str)> {
    if let Some(rest) = text.strip_prefix(GEMMA4_QUOTE) {
        let (key, rest) = rest.split_once(GEMMA4_QUOTE)?;
        return Some((key.to_string(), rest));
    }
    let end = text.find([':', ',', '{', '}', '[', ']', '<'])?;
    let key = text[..end].trim();
    (!key.is_empty()).then(|| (key.to_string(), &text[end..]))
}

/// The whole calls at the start of `text`, each `call:NAME{…}` in its
/// tags (the first one's [`GEMMA4_CALL_OPEN`] may be left out: a prompt
/// that ended with it), and the text after the last whole one. A call's
/// [`GEMMA4_CALL_CLOSE`] may be left out at the end of the text alone.
pub fn read_gemma4_calls(text: &str) -> (Vec<(String, Value)>, &str) {
    let mut calls = Vec::new();
    let mut rest = text;
    loop {
        let Some((call, after)) = read_one(rest, calls.is_empty()) else { return (calls, rest) };
        calls.push(call);
        rest = after;
    }
}

/// One call at the start of `text` and the text after it.
fn read_one(text: &str, first: bool) -> Option<((String, Value), &str)> {
    let text = text.trim_start();
    let text = match text.strip_prefix(GEMMA4_CALL_OPEN) {
        Some(opened) => opened,
        None if first => text,
        None => return None,
    };
    let text = text.trim_start().strip_prefix(GEMMA4_CALL_NAME)?;
    let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    let end = text.find(|c: char| !valid(c))?;
    let (name, text) = text.split_at(end);
    if name.is_empty() || !text.starts_with('{') {
        return None;
    }
    let (arguments, text) = read_gemma4_value(text)?;
    let rest = text.trim_start();
    match rest.strip_prefix(GEMMA4_CALL_CLOSE) {
        Some(after) => Some(((name.to_string(), arguments), after)),
        None if rest.is_empty() => Some(((name.to_string(), arguments), rest)),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_negative_zero_integer_reads_as_the_integer_zero() {
        let (value, rest) = read_gemma4_value("-0,x").expect("a value");
        assert!(value.is_i64() && value == json!(0) && rest == ",x", "{value} {rest:?}");
        let (value, _) = read_gemma4_value("-0.0}").expect("a value");
        assert!(value.is_f64(), "a float stays a float: {value}");
    }

    #[test]
    fn values_written_in_gemma4_syntax_read_back_the_same() {
        let value = json!({"city": "Oslo {x}, [y]", "days": 3, "hot": false, "z": null,
            "nested": {"b": [1, 2.5, "two"], "a": {}}, "list": []});
        let written = gemma4_value(&value);
        assert_eq!(
            written,
            r#"{city:<|"|>Oslo {x}, [y]<|"|>,days:3,hot:false,list:[],nested:{a:{},b:[1,2.5,<|"|>two<|"|>]},z:null}"#
        );
        assert_eq!(read_gemma4_value(&written), Some((value, "")));
        // Spaces, and keys quoted, as a model may write them.
        let spaced = r#"{ city: <|"|>Lima<|"|>, <|"|>n<|"|>: -1e3 }"#;
        assert_eq!(read_gemma4_value(spaced), Some((json!({"city": "Lima", "n": -1000.0}), "")));
        for bad in [r#"{city:<|"|>Lima}"#, "{city:Lima}", "{city:1", "{:1}", "[1,,2]", "{a:1 b:2}"] {
            assert_eq!(read_gemma4_value(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn calls_are_read_in_their_tags_and_a_cut_one_is_left() {
        let one = gemma4_call("get_weather", &json!({"city": "Oslo"}));
        assert_eq!(one, r#"<|tool_call>call:get_weather{city:<|"|>Oslo<|"|>}<tool_call|>"#);
        let two = format!("{one}\n{}", gemma4_call("get_time", &json!({"zone": "UTC"})));
        let (calls, rest) = read_gemma4_calls(&two);
        let names: Vec<&str> = calls.iter().map(|c| c.0.as_str()).collect();
        assert_eq!((names, rest), (vec!["get_weather", "get_time"], ""));
        assert_eq!(calls[1].1, json!({"zone": "UTC"}));
        // Opened by the prompt; the close left out at the end.
        let (calls, rest) = read_gemma4_calls(r#"call:f{a:1}"#);
        assert_eq!((calls.len(), rest), (1, ""));
        let cut = format!("{one}<|tool_call>call:get_time{{zone:<|\"|>UT");
        let (calls, rest) = read_gemma4_calls(&cut);
        assert_eq!((calls.len(), rest), (1, r#"<|tool_call>call:get_time{zone:<|"|>UT"#));
        for text in ["Hello", "call:{a:1}", "call:f(a)", r#"<|tool_call>call:f{a:1} and more"#] {
            assert!(read_gemma4_calls(text).0.is_empty(), "{text:?}");
        }
        let (calls, _) = read_gemma4_calls("call:f{a:1}<tool_call|>call:g{}");
        assert_eq!(calls.len(), 1, "a later call opens with its tag");
    }
}
