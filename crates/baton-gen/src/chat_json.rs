//! The `tojson` filter as the templates' authors rendered them: Hugging
//! Face's override of Jinja's filter, which llama.cpp's template engine
//! follows, writes Python's `json.dumps` (`", "` and `": "` between items,
//! `indent` for a pretty form, `ensure_ascii` off by default) and escapes
//! nothing for HTML. minijinja's own filter escapes `<`, `>`, `&` and `'`
//! (as `\u003c`…) and refuses the `ensure_ascii` and `sort_keys` arguments
//! templates pass, so a tool whose description holds `<` reached the model
//! in another text than the reference's, and some templates did not render.

use std::collections::BTreeMap;

use minijinja::value::{Kwargs, Value, ValueKind};
use minijinja::Error;

/// `value | tojson(indent=None, ensure_ascii=False, sort_keys=False)`.
pub(crate) fn tojson(value: &Value, indent: Option<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let indent = match indent {
        Some(indent) => Some(indent),
        None => kwargs.get::<Option<Value>>("indent")?.filter(|v| !v.is_none()),
    };
    let ensure_ascii = kwargs.get::<Option<bool>>("ensure_ascii")?.unwrap_or(false);
    let sort_keys = kwargs.get::<Option<bool>>("sort_keys")?.unwrap_or(false);
    kwargs.assert_all_used()?;
    let value = if sort_keys { sorted(value) } else { value.clone() };
    let none = Kwargs::from_iter(std::iter::empty::<(&str, Value)>());
    let text = minijinja::filters::tojson(&value, indent, none)?;
    let text = without_html_escapes(text.as_str().unwrap_or_default());
    Ok(Value::from_safe_string(if ensure_ascii { ascii(&text) } else { text }))
}

/// `value` with every map's keys in order.
fn sorted(value: &Value) -> Value {
    match value.kind() {
        ValueKind::Map => {
            let map: BTreeMap<String, Value> = value
                .try_iter()
                .into_iter()
                .flatten()
                .map(|key| {
                    let item = value.get_item(&key).unwrap_or_default();
                    (key.to_string(), sorted(&item))
                })
                .collect();
            Value::from(map)
        }
        ValueKind::Seq | ValueKind::Iterable => {
            Value::from(value.try_iter().into_iter().flatten().map(|v| sorted(&v)).collect::<Vec<_>>())
        }
        _ => value.clone(),
    }
}

/// A JSON text with the escapes of `<`, `>`, `&` and `'` written as the
/// characters (an escaped backslash before `u003c` is left alone).
fn without_html_escapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let escape = &rest[at..];
        let html = [("\\u003c", '<'), ("\\u003e", '>'), ("\\u0026", '&'), ("\\u0027", '\'')]
            .into_iter()
            .find(|(code, _)| escape.starts_with(code));
        match html {
            Some((code, c)) => {
                out.push(c);
                rest = &escape[code.len()..];
            }
            None => {
                // Any other escape is two characters at least: kept whole.
                let len = escape[1..].chars().next().map_or(1, |c| 1 + c.len_utf8());
                out.push_str(&escape[..len]);
                rest = &escape[len..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// `ensure_ascii=True`: every character beyond ASCII as Python writes it,
/// `\uXXXX` (two, a surrogate pair, above U+FFFF).
fn ascii(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(source: &str, value: serde_json::Value) -> String {
        let mut env = minijinja::Environment::new();
        env.add_filter("tojson", tojson);
        env.add_template("t", source).expect("compiles");
        let value = crate::chat_values::json_value(&value);
        env.get_template("t").expect("template").render(minijinja::context! { v => value }).expect("renders")
    }

    #[test]
    fn tojson_writes_pythons_json_dumps() {
        // Keys in their order (sort_keys sorts them), nothing escaped for
        // HTML (a backslash the text holds stays escaped), ensure_ascii as
        // Python writes it.
        let v = serde_json::json!({"b": "x < y & 'z' \\u003c", "a": [1, 2.5, null, true], "c": "é😀\n"});
        assert_eq!(
            render("{{ v | tojson }}", v.clone()),
            r#"{"b": "x < y & 'z' \\u003c", "a": [1, 2.5, null, true], "c": "é😀\n"}"#
        );
        assert_eq!(
            render("{{ v | tojson(ensure_ascii=True) }}", v.clone()),
            r#"{"b": "x < y & 'z' \\u003c", "a": [1, 2.5, null, true], "c": "\u00e9\ud83d\ude00\n"}"#
        );
        assert_eq!(render("{{ v.a | tojson(indent=2) }}", v.clone()), "[\n  1,\n  2.5,\n  null,\n  true\n]");
        assert_eq!(render("{{ v | tojson(sort_keys=True, ensure_ascii=False) }}", v.clone()).find("\"a\""), Some(1));
        let mut env = minijinja::Environment::new();
        env.add_filter("tojson", tojson);
        env.add_template("bad", "{{ 1 | tojson(colour=1) }}").expect("compiles");
        assert!(env.get_template("bad").expect("template").render(()).is_err(), "an unknown argument is refused");
    }
}
