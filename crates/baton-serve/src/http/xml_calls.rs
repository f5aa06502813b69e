//! Tool calls in the XML form Qwen 3.5 and 3.6 (and Qwen3-Coder) were
//! trained on: inside the Hermes `<tool_call>` tags,
//! `<function=NAME>` and one `<parameter=KEY>` block per argument, its
//! value as plain text (see [`read_xml_call`]). Results go back as in the
//! Hermes form, in `<tool_response>` tags of a user turn.
//!
//! A chat template is taken for one of these models' when its text
//! teaches the form (it holds both `<function=` and `<parameter=`).

use baton_gen::constraint::{
    read_xml_call, TOOL_CALL_CLOSE, TOOL_CALL_OPEN, XML_FUNCTION_CLOSE, XML_FUNCTION_OPEN, XML_PARAMETER_CLOSE,
    XML_PARAMETER_OPEN,
};
use serde_json::Value;

/// Whether a chat template (its source) teaches the XML form.
pub fn is_xml_template(source: &str) -> bool {
    source.contains(XML_FUNCTION_OPEN) && source.contains(XML_PARAMETER_OPEN)
}

/// The system message's description of the tools (each its declaration
/// as the model sees it) and of how a call is written.
pub fn preamble(declarations: &[&Value], parallel: bool) -> String {
    let declared: Vec<String> = declarations.iter().map(|d| d.to_string()).collect();
    let how_many = if parallel { "one or more" } else { "one" };
    format!(
        "# Tools\n\nYou may call {how_many} of these functions to answer the user:\n<tools>\n{}\n</tools>\n\n\
         To call a function, write the call in this form, with nothing after it:\n{TOOL_CALL_OPEN}\n\
         {XML_FUNCTION_OPEN}FUNCTION_NAME>\n{XML_PARAMETER_OPEN}PARAMETER_NAME>\nthe value\n{XML_PARAMETER_CLOSE}\n\
         {XML_FUNCTION_CLOSE}\n{TOOL_CALL_CLOSE}\n\
         One parameter block for each argument; a value is plain text on its own lines (an object or a list as JSON).",
        declared.join("\n")
    )
}

/// Whether `text` (a call's body, after its `<tool_call>`) is in the XML
/// form.
pub fn is_xml_body(text: &str) -> bool {
    let text = text.trim_start();
    text.starts_with(XML_FUNCTION_OPEN) || (!text.is_empty() && XML_FUNCTION_OPEN.starts_with(text))
}

/// One call's body (after its `<tool_call>`): its function's name and
/// arguments as a JSON text, typed by the tools' parameters (`schemas`:
/// each tool's name and parameters' schema), and the text after it (its
/// `</tool_call>` removed); `None` unless a whole call starts there.
pub fn read_body<'t>(text: &'t str, schemas: &[(String, Value)]) -> Option<((String, String), &'t str)> {
    let name = text.trim_start().strip_prefix(XML_FUNCTION_OPEN)?.split_once('>')?.0;
    let parameters = schemas.iter().find(|(n, _)| n == name).map(|(_, p)| p);
    let (name, arguments, rest) = read_xml_call(text, parameters)?;
    let rest = rest.trim_start();
    let rest = rest.strip_prefix(TOOL_CALL_CLOSE).unwrap_or(rest);
    Some(((name, arguments.to_string()), rest))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_xml_body_reads_with_its_types_and_templates_that_teach_the_form_are_known() {
        let schemas =
            vec![("f".to_string(), json!({"properties": {"a": {"type": "string"}, "n": {"type": "number"}}}))];
        let body = "\n<function=f>\n<parameter=a>\n7\n</parameter>\n<parameter=n>\n7\n</parameter>\n</function>\n</tool_call>\n";
        let ((name, arguments), rest) = read_body(body, &schemas).expect("a call");
        assert_eq!((name.as_str(), arguments.as_str(), rest), ("f", r#"{"a":"7","n":7}"#, "\n"));
        assert!(read_body("<function=f>\n<parameter=a>\n7", &schemas).is_none(), "cut");
        assert!(is_xml_body("\n<function=f>") && is_xml_body("<func") && !is_xml_body("{\"name\"") && !is_xml_body(""));
        assert!(is_xml_template("... <function=example>\\n<parameter=x> ..."));
        assert!(!is_xml_template("<tool_call>\\n{\"name\": <function-name>}"));
        let text = preamble(&[&json!({"type": "function", "function": {"name": "f"}})], false);
        assert!(text.contains("<function=FUNCTION_NAME>\n<parameter=PARAMETER_NAME>\n") && text.contains("call one"));
    }
}
