//! Tool calls in gpt-oss's harmony format: a call is a message on the
//! commentary channel addressed to the function,
//! `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}<|call|>`
//! (or with the recipient in the role's header, `<|start|>assistant
//! to=functions.NAME<|channel|>commentary json<|message|>{…}`), and
//! `<|call|>` ends the generation: one call per answer. The tools are
//! described in the system message as harmony's `functions` namespace of
//! TypeScript-like signatures. The markers are read as text (the tokenizer
//! renders harmony's as text).
//!
//! A chat template is taken for harmony's when it writes both
//! `<|start|>` and `<|channel|>`.

use baton_gen::constraint::{HARMONY_CALL_CHANNEL, HARMONY_CALL_END, HARMONY_MESSAGE, HARMONY_RECIPIENT};
use serde_json::Value;

/// The role header's start, which may come before a call's channel.
const ASSISTANT_START: &str = "<|start|>assistant";

/// Whether a chat template (its source) writes harmony's messages.
pub fn is_harmony_template(source: &str) -> bool {
    source.contains("<|start|>") && source.contains("<|channel|>")
}

/// The system message's description of `functions` (each its name,
/// description and parameters' schema) as harmony's `functions`
/// namespace, and how a call is written.
pub fn preamble(functions: &[(&str, Option<&str>, &Value)]) -> String {
    let mut text = String::from("# Tools\n\n## functions\n\nnamespace functions {\n\n");
    for (name, description, parameters) in functions {
        if let Some(description) = description {
            for line in description.lines() {
                text.push_str(&format!("// {line}\n"));
            }
        }
        text.push_str(&format!("type {name} = (_: {parameters}) => any;\n\n"));
    }
    text.push_str("} // namespace functions\n\n");
    text.push_str(&format!(
        "To call a function, write a message on the commentary channel addressed to it, \
         {HARMONY_CALL_CHANNEL}{HARMONY_RECIPIENT}NAME <|constrain|>json{HARMONY_MESSAGE}, \
         then its arguments as one JSON object, then {HARMONY_CALL_END}."
    ));
    text
}

/// The call `text` holds, if it is one harmony call: the function's name
/// and its arguments as a JSON text. The text may start at the channel,
/// at the recipient (a required call, whose prompt ended with the
/// channel), or at the role's header; the arguments must be one whole
/// JSON object, followed by nothing but `<|call|>`.
pub fn read_call(text: &str) -> Option<(String, String)> {
    let text = text.trim_start();
    let text = text.strip_prefix(ASSISTANT_START).map_or(text, str::trim_start);
    let text = text.strip_prefix(HARMONY_CALL_CHANNEL.trim_end()).map_or(text, str::trim_start);
    let rest = text.strip_prefix(HARMONY_RECIPIENT)?;
    let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let end = rest.find(|c: char| !valid(c)).unwrap_or(rest.len());
    let (name, rest) = rest.split_at(end);
    let (header, body) = rest.split_once(HARMONY_MESSAGE)?;
    // The header holds the channel and the content type, no other message.
    if name.is_empty() || header.contains("<|start|>") || header.contains("<|end|>") {
        return None;
    }
    let body = body.trim_end();
    let body = body.strip_suffix(HARMONY_CALL_END).unwrap_or(body).trim_end();
    match serde_json::from_str::<Value>(body).ok()? {
        arguments @ Value::Object(_) => Some((name.to_string(), arguments.to_string())),
        _ => None,
    }
}

/// Whether `text` may still become a harmony call: empty, a start of one
/// of the openings a call's text has, or opened by one.
pub fn may_open(text: &str) -> bool {
    let text = text.trim_start();
    let channel = format!("{HARMONY_CALL_CHANNEL}{HARMONY_RECIPIENT}");
    [channel.as_str(), HARMONY_RECIPIENT, ASSISTANT_START]
        .iter()
        .any(|opening| opening.starts_with(text) || text.starts_with(opening))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_harmony_call_is_read_from_its_channel_recipient_or_header() {
        let want = Some(("get_weather".to_string(), r#"{"city":"Oslo"}"#.to_string()));
        for text in [
            r#"<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"}"#,
            r#"to=functions.get_weather <|constrain|>json<|message|>{"city":"Oslo"}<|call|>"#,
            r#" <|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city":"Oslo"}"#,
            r#"to=functions.get_weather<|message|>{"city":"Oslo"} "#,
        ] {
            assert_eq!(read_call(text), want, "{text:?}");
        }
        for text in [
            "Hello there",
            r#"to=functions.get_weather <|constrain|>json<|message|>{"city": "Os"#,
            r#"to=functions.get_weather <|constrain|>json<|message|>{"city":"Oslo"} and more"#,
            r#"to=functions.f <|constrain|>json<|message|>[1, 2]"#,
            r#"to=functions. <|constrain|>json<|message|>{}"#,
            r#"to=functions.f<|end|><|start|>user<|message|>{}"#,
        ] {
            assert_eq!(read_call(text), None, "{text:?}");
        }
    }

    #[test]
    fn text_that_may_still_open_a_call_is_held_and_words_are_not() {
        for text in ["", "  <|chan", "<|channel|>commentary to=functions.f", "to=", "<|start|>assistant to="] {
            assert!(may_open(text), "{text:?}");
        }
        for text in ["Hello", "<|channel|>final", "tomorrow"] {
            assert!(!may_open(text), "{text:?}");
        }
        assert!(is_harmony_template("{{ '<|start|>' + role }}<|channel|>final<|message|>"));
        assert!(!is_harmony_template("<|im_start|>assistant"));
        let described = preamble(&[("f", Some("Finds it."), &serde_json::json!({"type": "object"}))]);
        assert!(described.contains("// Finds it.\ntype f = (_: {\"type\":\"object\"}) => any;"), "{described}");
    }
}
