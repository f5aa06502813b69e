//! Tool calls in Gemma 4's format: `<|tool_call>call:NAME{key:value,…}<tool_call|>`,
//! the arguments in Gemma's own value syntax (keys bare, strings between
//! two `<|"|>` markers; see [`gemma4_value`]), several calls one after
//! another. The tools are declared in the system turn, each as
//! `<|tool>declaration:NAME{description:…,parameters:{…}}<tool|>` with its
//! parameters' schema in the same syntax. The markers are read as text.
//!
//! A chat template is taken for Gemma 4's when it writes its turns
//! (`<|turn>`), as Baton's fallback for a Gemma 4 vocabulary does.

use baton_gen::constraint::{
    gemma4_value, read_gemma4_calls, GEMMA4_CALL_CLOSE, GEMMA4_CALL_NAME, GEMMA4_CALL_OPEN, GEMMA4_QUOTE,
};
use serde_json::{Map, Value};

/// What opens a Gemma 4 turn.
const TURN_OPEN: &str = "<|turn>";

/// What opens a tool's declaration in the system turn.
const DECLARATION_OPEN: &str = "<|tool>declaration:";

/// What closes it.
const DECLARATION_CLOSE: &str = "<tool|>";

/// Whether a chat template (its source) writes Gemma 4's turns.
pub fn is_gemma4_template(source: &str) -> bool {
    source.contains(TURN_OPEN)
}

/// The system turn's declarations of `functions` (each its name,
/// description and parameters' schema), and how a call is written.
pub fn preamble(functions: &[(&str, Option<&str>, &Value)]) -> String {
    let mut text = String::new();
    for (name, description, parameters) in functions {
        let mut declared = Map::new();
        declared.insert("description".into(), Value::from(description.unwrap_or_default()));
        declared.insert("parameters".into(), (*parameters).clone());
        text.push_str(&format!(
            "{DECLARATION_OPEN}{name}{}{DECLARATION_CLOSE}",
            gemma4_value(&Value::Object(declared))
        ));
    }
    text.push_str(&format!(
        "\nTo call a function, write {GEMMA4_CALL_OPEN}{GEMMA4_CALL_NAME}NAME{{key:value,...}}{GEMMA4_CALL_CLOSE}, \
         each string between {GEMMA4_QUOTE} marks."
    ));
    text
}

/// The calls `text` holds, if it is Gemma 4 calls and nothing else: each
/// function's name and its arguments as a JSON text. The text starts with
/// [`GEMMA4_CALL_OPEN`] or, when the prompt ended with it, inside it.
pub fn read_calls(text: &str) -> Option<Vec<(String, String)>> {
    let (calls, rest) = read_opened(text)?;
    (!calls.is_empty() && rest.trim().is_empty()).then_some(calls)
}

/// The whole calls of a text cut short (by `max_tokens`) inside a later
/// call or between calls; `None` when the first call is cut or the text
/// is not calls.
pub fn read_cut_calls(text: &str) -> Option<Vec<(String, String)>> {
    let (calls, rest) = read_opened(text)?;
    let rest = rest.trim_start();
    let in_a_call = rest.starts_with(GEMMA4_CALL_OPEN) || GEMMA4_CALL_OPEN.starts_with(rest);
    (!calls.is_empty() && in_a_call).then_some(calls)
}

/// [`read_gemma4_calls`] of a text that opens as a call does, the
/// arguments as JSON texts.
fn read_opened(text: &str) -> Option<(Vec<(String, String)>, &str)> {
    let trimmed = text.trim_start();
    if !(trimmed.starts_with(GEMMA4_CALL_OPEN) || trimmed.starts_with(GEMMA4_CALL_NAME)) {
        return None;
    }
    let (calls, rest) = read_gemma4_calls(trimmed);
    let calls = calls
        .into_iter()
        .map(|(name, arguments)| match arguments {
            Value::Object(_) => Some((name, arguments.to_string())),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    Some((calls, rest))
}

/// Whether `text` may still become a Gemma 4 call: empty, a start of
/// [`GEMMA4_CALL_OPEN`], or opened by it.
pub fn may_open(text: &str) -> bool {
    let text = text.trim_start();
    GEMMA4_CALL_OPEN.starts_with(text) || text.starts_with(GEMMA4_CALL_OPEN)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn gemma4_calls_are_read_whole_or_cut_and_words_are_not_calls() {
        let call = r#"<|tool_call>call:get_weather{city:<|"|>Oslo<|"|>}<tool_call|>"#;
        let want = ("get_weather".to_string(), r#"{"city":"Oslo"}"#.to_string());
        assert_eq!(read_calls(call), Some(vec![want.clone()]));
        assert_eq!(read_calls(&format!(" {call}\n{call}")).map(|c| c.len()), Some(2));
        assert_eq!(read_calls(r#"call:get_weather{city:<|"|>Oslo<|"|>}<tool_call|>"#), Some(vec![want.clone()]));
        for text in ["Hello", "", "<|tool_call>call:f{a:", &format!("{call} and words"), "call:f[1]"] {
            assert_eq!(read_calls(text), None, "{text:?}");
        }
        for cut in
            [format!("{call}<|tool_call>call:g{{a:"), format!("{call}\n<|tool_"), call.replace("<tool_call|>", "")]
        {
            let read = read_cut_calls(&cut).or_else(|| read_calls(&cut));
            assert_eq!(read, Some(vec![want.clone()]), "{cut:?}");
        }
        assert_eq!(read_cut_calls("<|tool_call>call:g{a:"), None, "the first call cut: text");
        for text in ["", " <|tool", "<|tool_call>call:f{"] {
            assert!(may_open(text), "{text:?}");
        }
        for text in ["Hi", "<|turn>", "call:f{}"] {
            assert!(!may_open(text), "{text:?}");
        }
    }

    #[test]
    fn tools_are_declared_in_gemma4_syntax() {
        let parameters = json!({"type": "object", "properties": {"city": {"type": "string"}}});
        let text = preamble(&[("get_weather", Some("The weather"), &parameters)]);
        assert!(
            text.starts_with(
                r#"<|tool>declaration:get_weather{description:<|"|>The weather<|"|>,parameters:{properties:{city:{type:<|"|>string<|"|>}},type:<|"|>object<|"|>}}<tool|>"#
            ),
            "{text}"
        );
        assert!(is_gemma4_template("{{ '<|turn>' + role }}"));
        assert!(!is_gemma4_template("<start_of_turn>user"));
    }
}
