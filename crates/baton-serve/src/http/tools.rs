//! Tools on `/v1/chat/completions`: `tools` and `tool_choice` checked, the
//! tools written into the conversation, and the model's call read back as
//! `tool_calls`.
//!
//! The tools reach the model through its own chat template: they are
//! described in the system message (one added when the conversation has
//! none) in the Hermes format that Qwen, SmolLM and most open tool-calling
//! models were trained on: the functions' signatures as JSON inside
//! `<tools></tools>`, and a call written as `<tool_call>{"name": …,
//! "arguments": {…}}</tool_call>`. Earlier calls in the conversation
//! (assistant messages with `tool_calls`) are written the same way, and
//! their results (`tool` messages) go back as user turns inside
//! `<tool_response></tool_response>`, which every template takes (Gemma's
//! knows only `user` and `model`).
//!
//! A template of the model's own that reads `tool_calls` and `tools` is
//! given the tools instead (in this shape, [`ToolPlan::declared`]) and
//! declares them itself, when it writes calls in the format decoding holds
//! them to (see `AppState::declared_tools`).
//!
//! Decoding then holds the call to the tools' grammar (llguidance, see
//! [`tool_call_grammar`]: the name one of the tools', the arguments held
//! to its parameters' JSON Schema as `response_format` schemas are):
//! `tool_choice: "required"` or a named function opens the answer with
//! `<tool_call>` and holds all of it; `"auto"` (the default) lets the model
//! answer in words or open a call, held once opened; `"none"` leaves the
//! tools out. With `parallel_tool_calls: true` an answer may hold several
//! calls, one after another each in its tags ([`MAX_CALLS`] at most); with
//! `false` (the default, as llama-server's), one.
//!
//! A model whose chat template is harmony's (gpt-oss) is told of its tools
//! and calls them in its own format instead (`harmony_calls.rs`): a
//! required call's prompt ends with the commentary channel's header and
//! the call is held to [`harmony_call_grammar`]; with `"auto"` the answer
//! goes free (it may think on the analysis channel first, or answer on
//! the final channel) and a call it starts on the commentary channel is
//! held to the tools from its header on ([`harmony_lazy_call_grammar`],
//! a lazy grammar) and read from it. One call per answer (`<|call|>`
//! ends the generation). Earlier calls in the conversation are written in
//! the Hermes form, unless the template reads them as fields
//! (`history.rs`).
//!
//! A model whose chat template writes Gemma 4's turns (Baton's fallback
//! for a Gemma 4 vocabulary) has its tools declared and calls them in
//! Gemma 4's format (`gemma4_calls.rs`, `<|tool_call>call:NAME{…}<tool_call|>`):
//! held to [`gemma4_call_grammar`] as Hermes calls are to theirs, a
//! required call's prompt ending with `<|tool_call>`, an `"auto"` answer
//! held once it opens with that tag. Its earlier calls and their results
//! go back into the conversation in its own format (`history.rs`).
//!
//! A model whose chat template teaches the XML form (Qwen 3.5 and 3.6,
//! Qwen3-Coder: `<function=NAME>` and `<parameter=KEY>` blocks inside the
//! same `<tool_call>` tags, `xml_calls.rs`) is told of its tools in that
//! form and held to [`xml_call_grammar`]; its calls are read with each
//! value typed by its parameter's schema, and its earlier calls written
//! back in the same form.

use std::sync::Arc;

use baton_gen::constraint::{
    gemma4_call_grammar, harmony_call_grammar, harmony_lazy_call_grammar, tool_call_grammar, xml_call_grammar,
    CallShape, GrammarSource, GEMMA4_CALL_OPEN, HARMONY_CALL_CHANNEL, HARMONY_CALL_TRIGGERS, TOOL_CALL_CLOSE,
};
pub use baton_gen::constraint::{MAX_CALLS, TOOL_CALL_OPEN};
use baton_gen::Message;
use serde_json::{json, Value};

use super::error::ApiError;
use super::{gemma4_calls, harmony_calls, xml_calls};
use crate::engine::{Grammars, OutputFormat};

/// Most tools a request may offer.
pub const MAX_TOOLS: usize = 64;

/// How the answer may call a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolMode {
    /// The answer is a call (the prompt ends with [`TOOL_CALL_OPEN`]).
    Required,
    /// Words, or a call opened by [`TOOL_CALL_OPEN`].
    Auto,
}

/// The format the model writes its calls in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallFormat {
    /// `<tool_call>{"name": …, "arguments": {…}}</tool_call>`.
    Hermes,
    /// gpt-oss's: a commentary-channel message to `functions.NAME`.
    Harmony,
    /// Gemma 4's: `<|tool_call>call:NAME{key:value,…}<tool_call|>`.
    Gemma4,
    /// Qwen 3.5's: `<tool_call>` then `<function=NAME>` and a
    /// `<parameter=KEY>` block per argument.
    Xml,
}

impl CallFormat {
    /// The format of a model whose chat template's source is `template`.
    pub fn of_template(template: &str) -> CallFormat {
        if harmony_calls::is_harmony_template(template) {
            CallFormat::Harmony
        } else if gemma4_calls::is_gemma4_template(template) {
            CallFormat::Gemma4
        } else if xml_calls::is_xml_template(template) {
            CallFormat::Xml
        } else {
            CallFormat::Hermes
        }
    }
}

/// The tools of a request that may call one.
#[derive(Debug, Clone)]
pub struct ToolPlan {
    /// How the answer may call one.
    pub mode: ToolMode,
    /// The format decoding is held to: the calls' grammar, to compile
    /// against the model's vocabulary ([`OutputFormat::compiled`]; a
    /// tool's parameters it cannot hold to are refused then).
    pub format: OutputFormat,
    /// The system message's description of the tools.
    pub preamble: String,
    /// The tools that may be called: each one's name and parameters.
    pub callable: Vec<(String, Value)>,
    /// Their declarations in chat completions' `tools` shape, as a
    /// template that declares tools itself is given them.
    pub declared: Value,
    /// The format the calls are written in.
    pub calls: CallFormat,
}

impl ToolPlan {
    /// What the prompt ends with when a call is required (the answer
    /// opens it as the tools' instructions show), and whether its special
    /// tokens' texts are read as those tokens.
    pub fn opening(&self) -> (String, bool) {
        match self.calls {
            CallFormat::Hermes | CallFormat::Xml => (format!("{TOOL_CALL_OPEN}\n"), false),
            CallFormat::Harmony => (HARMONY_CALL_CHANNEL.to_string(), true),
            CallFormat::Gemma4 => (GEMMA4_CALL_OPEN.to_string(), true),
        }
    }
}

fn bad(name: &'static str, why: impl Into<String>) -> ApiError {
    ApiError::invalid_param(name, why)
}

/// `parallel_tool_calls`: absent or `null` is `false`, as llama-server's
/// default (OpenAI's is `true`): small models asked for "one or more"
/// calls write the same call again until `max_tokens`.
pub fn parallel(value: Option<&Value>) -> Result<bool, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(parallel)) => Ok(*parallel),
        Some(other) => Err(bad("parallel_tool_calls", format!("{other}: true or false"))),
    }
}

/// Checks `tools` and `tool_choice`; `None` when no tool may be called.
/// With `parallel`, an answer may hold several calls.
pub fn plan(
    tools: Option<&Value>,
    choice: Option<&Value>,
    parallel: bool,
    calls: CallFormat,
) -> Result<Option<ToolPlan>, ApiError> {
    let tools = match tools {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(list)) => list.as_slice(),
        Some(_) => return Err(bad("tools", "tools is a list of {\"type\": \"function\", \"function\": {…}}")),
    };
    if tools.len() > MAX_TOOLS {
        return Err(bad("tools", format!("at most {MAX_TOOLS} tools, not {}", tools.len())));
    }
    let mut functions = Vec::with_capacity(tools.len());
    for (i, tool) in tools.iter().enumerate() {
        functions.push(function(tool).map_err(|why| bad("tools", format!("tools[{i}]: {why}")))?);
    }
    if let Some(name) =
        functions.iter().enumerate().find_map(|(i, f)| functions[..i].iter().any(|g| g.0 == f.0).then_some(&f.0))
    {
        return Err(bad("tools", format!("two tools are named {name:?}")));
    }
    let named = |name: &str| functions.iter().position(|f| f.0 == name);
    let (mode, only) = match choice {
        None | Some(Value::Null) => (if functions.is_empty() { None } else { Some(ToolMode::Auto) }, None),
        Some(Value::String(s)) => match s.as_str() {
            "none" => (None, None),
            "auto" => (Some(ToolMode::Auto), None),
            "required" => (Some(ToolMode::Required), None),
            other => {
                return Err(bad("tool_choice", format!("{other:?}: \"none\", \"auto\", \"required\" or a function")))
            }
        },
        Some(Value::Object(o)) => {
            let name = o
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .filter(|_| o.get("type").and_then(Value::as_str) == Some("function"))
                .ok_or_else(|| {
                    bad("tool_choice", "a named choice is {\"type\": \"function\", \"function\": {\"name\": …}}")
                })?;
            let index = named(name).ok_or_else(|| bad("tool_choice", format!("no tool is named {name:?}")))?;
            (Some(ToolMode::Required), Some(index))
        }
        Some(other) => {
            return Err(bad("tool_choice", format!("{other}: \"none\", \"auto\", \"required\" or a function")))
        }
    };
    let Some(mode) = mode else { return Ok(None) };
    if functions.is_empty() {
        return Err(bad("tool_choice", "tool_choice asks for a call but no tools are given"));
    }
    let callable: Vec<&(String, Value, Value)> = match only {
        Some(i) => vec![&functions[i]],
        None => functions.iter().collect(),
    };
    let signatures = callable.iter().map(|f| (f.0.as_str(), &f.2));
    let described: Vec<(&str, Option<&str>, &Value)> = callable
        .iter()
        .map(|f| (f.0.as_str(), f.1["function"].get("description").and_then(Value::as_str), &f.2))
        .collect();
    let shape = CallShape { parallel, opens: mode == ToolMode::Auto };
    let held = |grammar: GrammarSource, open: &'static str| {
        let grammar = Arc::new(grammar);
        match mode {
            ToolMode::Required => OutputFormat::Source(grammar),
            ToolMode::Auto => OutputFormat::CallOrTextSource(grammar, open),
        }
    };
    let (format, preamble) = match calls {
        CallFormat::Hermes => {
            (held(tool_call_grammar(signatures, shape), TOOL_CALL_OPEN), preamble(&callable, parallel))
        }
        CallFormat::Gemma4 => {
            (held(gemma4_call_grammar(signatures, shape), GEMMA4_CALL_OPEN), gemma4_calls::preamble(&described))
        }
        CallFormat::Xml => {
            let declarations: Vec<&Value> = callable.iter().map(|f| &f.1).collect();
            (held(xml_call_grammar(signatures, shape), TOOL_CALL_OPEN), xml_calls::preamble(&declarations, parallel))
        }
        CallFormat::Harmony => {
            let format = match mode {
                ToolMode::Required => OutputFormat::Source(Arc::new(harmony_call_grammar(signatures))),
                ToolMode::Auto => OutputFormat::TriggeredSource(
                    Arc::new(harmony_lazy_call_grammar(signatures)),
                    &HARMONY_CALL_TRIGGERS,
                ),
            };
            (format, harmony_calls::preamble(&described))
        }
    };
    let declared = Value::Array(callable.iter().map(|f| f.1.clone()).collect());
    let callable = callable.iter().map(|f| (f.0.clone(), f.2.clone())).collect();
    Ok(Some(ToolPlan { mode, format, preamble, callable, declared, calls }))
}

/// `plan` with its calls' grammar compiled against `grammars`: a tool's
/// parameters that cannot be held to are refused (400, naming `tools`).
pub fn compiled(plan: ToolPlan, grammars: &Grammars) -> Result<ToolPlan, ApiError> {
    match plan.format.clone().compiled(grammars) {
        Ok(format) => Ok(ToolPlan { format, ..plan }),
        Err(whole) => {
            // Which tool's parameters: each compiled alone, its schema's
            // message rather than the calls' grammar's.
            for (name, parameters) in &plan.callable {
                let alone = GrammarSource::JsonSchema(parameters.clone());
                if let Err(why) = OutputFormat::grammar(&alone, grammars) {
                    return Err(bad("tools", format!("function {name:?}: parameters: {why}")));
                }
            }
            Err(bad("tools", format!("parameters: {whole}")))
        }
    }
}

/// A tool's name, its declaration as the model sees it, and its
/// parameters' schema.
fn function(tool: &Value) -> Result<(String, Value, Value), String> {
    if tool.get("type").and_then(Value::as_str) != Some("function") {
        return Err("a tool is {\"type\": \"function\", \"function\": {…}}".into());
    }
    let function = tool.get("function").and_then(Value::as_object).ok_or("function is missing")?;
    let name = function.get("name").and_then(Value::as_str).ok_or("function.name is missing")?;
    let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if name.is_empty() || name.len() > 64 || !name.chars().all(valid) {
        return Err(format!("function.name {name:?}: 1 to 64 letters, digits, `_` or `-`"));
    }
    if function.get("description").is_some_and(|d| !d.is_string()) {
        return Err("function.description is a string".into());
    }
    let parameters = function.get("parameters").cloned().unwrap_or_else(|| json!({"type": "object", "properties": {}}));
    if !(parameters.is_object() || parameters.is_boolean()) {
        return Err(format!("function.parameters is a JSON Schema (an object), not {parameters}"));
    }
    let mut declared = serde_json::Map::new();
    declared.insert("name".into(), Value::from(name));
    if let Some(description) = function.get("description") {
        declared.insert("description".into(), description.clone());
    }
    declared.insert("parameters".into(), parameters.clone());
    Ok((name.to_string(), json!({"type": "function", "function": declared}), parameters))
}

fn preamble(functions: &[&(String, Value, Value)], parallel: bool) -> String {
    let signatures: Vec<String> = functions.iter().map(|f| f.1.to_string()).collect();
    let how_many = if parallel { "one or more" } else { "one" };
    format!(
        "# Tools\n\nYou may call {how_many} of the following functions to answer the user.\n\n\
         You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{}\n</tools>\n\n\
         To call a function, return a json object with the function name and arguments within \
         {TOOL_CALL_OPEN}{TOOL_CALL_CLOSE} XML tags:\n{TOOL_CALL_OPEN}\n\
         {{\"name\": <function-name>, \"arguments\": <args-json-object>}}\n{TOOL_CALL_CLOSE}",
        signatures.join("\n")
    )
}

/// The conversation with the tools described in its system message.
pub fn with_tools(mut messages: Vec<Message>, plan: &ToolPlan) -> Vec<Message> {
    match messages.first_mut() {
        Some(first) if first.role == "system" => {
            first.content = format!("{}\n\n{}", first.content.trim_end(), plan.preamble);
        }
        _ => messages.insert(0, Message::system(plan.preamble.clone())),
    }
    messages
}

/// An earlier call of an assistant message's `tool_calls`: its `id`, if
/// it has one, the function's name and its arguments.
pub struct EarlierCall {
    /// The call's `id`, which a result names as its `tool_call_id`.
    pub id: Option<String>,
    /// The function's name.
    pub name: String,
    /// Its arguments (OpenAI's JSON text read as JSON; a text that is not
    /// JSON stays a string).
    pub arguments: Value,
}

/// An assistant message's `tool_calls`, checked.
pub fn earlier_calls(calls: &Value) -> Result<Vec<EarlierCall>, ApiError> {
    let list = calls.as_array().ok_or_else(|| bad("messages", "tool_calls is a list"))?;
    let mut read = Vec::with_capacity(list.len());
    for call in list {
        let function = call.get("function").ok_or_else(|| bad("messages", "a tool call has no function"))?;
        let name =
            function.get("name").and_then(Value::as_str).ok_or_else(|| bad("messages", "a tool call has no name"))?;
        let arguments = match function.get("arguments") {
            // OpenAI sends the arguments as a JSON string.
            Some(Value::String(s)) => serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone())),
            Some(other) => other.clone(),
            None => json!({}),
        };
        let id = call.get("id").and_then(Value::as_str).map(str::to_string);
        read.push(EarlierCall { id, name: name.to_string(), arguments });
    }
    Ok(read)
}

/// An assistant message's earlier `tool_calls`, written as the model
/// writes a call in the Hermes format.
pub fn written_calls(calls: &Value) -> Result<String, ApiError> {
    let written: Vec<String> = earlier_calls(calls)?
        .into_iter()
        .map(|call| {
            let call = json!({"name": call.name, "arguments": call.arguments});
            format!("{TOOL_CALL_OPEN}\n{call}\n{TOOL_CALL_CLOSE}")
        })
        .collect();
    Ok(written.join("\n"))
}

/// A tool's result, written as the user turn that carries it.
pub fn written_result(content: &str) -> String {
    format!("<tool_response>\n{content}\n</tool_response>")
}

/// A call read back from the answer's text: the function's name and its
/// arguments as a JSON text (what `function.arguments` carries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The function's name.
    pub name: String,
    /// The arguments, a JSON text.
    pub arguments: String,
}

impl Call {
    /// The `tool_calls` entry (`index` set when streamed).
    pub fn to_json(&self, id: &str, index: Option<usize>) -> Value {
        let mut call =
            json!({"id": id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}});
        if let (Some(index), Some(map)) = (index, call.as_object_mut()) {
            map.insert("index".into(), Value::from(index));
        }
        call
    }
}

/// The calls the text holds, if it is calls: the first call's JSON
/// object alone ([`ToolMode::Required`], whose prompt opened it) or opened
/// by [`TOOL_CALL_OPEN`] ([`ToolMode::Auto`]), each closed or not by
/// [`TOOL_CALL_CLOSE`], the next ones each opened by [`TOOL_CALL_OPEN`].
/// `None` unless every call is whole (a call cut by `max_tokens` makes
/// the answer text). A call in the XML form is read as such, each value
/// typed by its parameter's schema in `schemas` (each tool's name and
/// parameters).
pub fn read_calls(text: &str, mode: ToolMode, schemas: &[(String, Value)]) -> Option<Vec<Call>> {
    if let Some((name, arguments)) = harmony_calls::read_call(text) {
        return Some(vec![Call { name, arguments }]);
    }
    if let Some(calls) = gemma4_calls::read_calls(text) {
        return Some(calls.into_iter().map(|(name, arguments)| Call { name, arguments }).collect());
    }
    let body = match mode {
        ToolMode::Required => text,
        ToolMode::Auto => text.trim_start().strip_prefix(TOOL_CALL_OPEN)?,
    };
    body.split(TOOL_CALL_OPEN).map(|part| read_part(part, schemas)).collect()
}

/// One call in its tags: in the XML form, or Hermes's JSON object.
fn read_part(text: &str, schemas: &[(String, Value)]) -> Option<Call> {
    if xml_calls::is_xml_body(text) {
        let ((name, arguments), rest) = xml_calls::read_body(text, schemas)?;
        return rest.trim().is_empty().then_some(Call { name, arguments });
    }
    read_one(text)
}

/// One call: its JSON object, closed or not by [`TOOL_CALL_CLOSE`].
fn read_one(text: &str) -> Option<Call> {
    let body = text.trim();
    let body = body.strip_suffix(TOOL_CALL_CLOSE).unwrap_or(body).trim_end();
    let value: Value = serde_json::from_str(body).ok()?;
    let name = value.get("name")?.as_str()?.to_string();
    let arguments = value.get("arguments")?.to_string();
    Some(Call { name, arguments })
}

/// The calls of an answer that ended for `reason` (`"length"`, `"stop"`…),
/// and its `finish_reason`: every call whole, `"tool_calls"`; or, cut by
/// `max_tokens` inside a later call (`reason` `"length"`), the whole calls
/// before it, `"length"` (the cut call is left out, never sent malformed).
/// `None` when the answer is text (a first call cut short included).
pub fn answer_calls(
    text: &str,
    mode: ToolMode,
    reason: &str,
    schemas: &[(String, Value)],
) -> Option<(Vec<Call>, &'static str)> {
    if let Some(calls) = read_calls(text, mode, schemas) {
        return Some((calls, "tool_calls"));
    }
    if reason != "length" {
        return None;
    }
    if let Some(calls) = gemma4_calls::read_cut_calls(text) {
        return Some((calls.into_iter().map(|(name, arguments)| Call { name, arguments }).collect(), "length"));
    }
    let body = match mode {
        ToolMode::Required => text,
        ToolMode::Auto => text.trim_start().strip_prefix(TOOL_CALL_OPEN)?,
    };
    let parts: Vec<&str> = body.split(TOOL_CALL_OPEN).collect();
    let (last, before) = parts.split_last()?;
    let mut calls: Vec<Call> = before.iter().map(|part| read_part(part, schemas)).collect::<Option<_>>()?;
    // The last part: a call cut short, or a whole call cut in the tags
    // after it.
    calls.extend(match xml_calls::is_xml_body(last) {
        true => xml_calls::read_body(last, schemas)
            .filter(|(_, rest)| {
                let rest = rest.trim_start();
                TOOL_CALL_OPEN.starts_with(rest) || TOOL_CALL_CLOSE.starts_with(rest)
            })
            .map(|((name, arguments), _)| Call { name, arguments }),
        false => read_before_tags(last),
    });
    (!calls.is_empty()).then_some((calls, "length"))
}

/// A whole call's object at the start of `text` followed by nothing but
/// a start of the tags between calls (`</tool_call>`, then `<tool_call>`).
fn read_before_tags(text: &str) -> Option<Call> {
    let text = text.trim_start();
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let value = values.next()?.ok()?;
    let rest = text[values.byte_offset()..].trim_start();
    let rest = match rest.strip_prefix(TOOL_CALL_CLOSE) {
        Some(after) => after.trim_start(),
        None if TOOL_CALL_CLOSE.starts_with(rest) => "",
        None => return None,
    };
    if !TOOL_CALL_OPEN.starts_with(rest) {
        return None;
    }
    let name = value.get("name")?.as_str()?.to_string();
    let arguments = value.get("arguments")?.to_string();
    Some(Call { name, arguments })
}

/// The one call the text holds (see [`read_calls`]), if it holds one.
pub fn read_call(text: &str, mode: ToolMode, schemas: &[(String, Value)]) -> Option<Call> {
    read_calls(text, mode, schemas).filter(|calls| calls.len() == 1).and_then(|mut calls| calls.pop())
}

/// Whether `text` may still open a call (auto mode): it is empty, a start
/// of [`TOOL_CALL_OPEN`], or opens with it (after whitespace), or so of a
/// harmony or Gemma 4 call's opening.
pub fn may_be_call(text: &str) -> bool {
    let text = text.trim_start();
    TOOL_CALL_OPEN.starts_with(text)
        || text.starts_with(TOOL_CALL_OPEN)
        || harmony_calls::may_open(text)
        || gemma4_calls::may_open(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_calls_are_read_each_in_its_tags() {
        let one = r#"{"name": "f", "arguments": {"a": 1}}"#;
        let two = format!("{one}\n</tool_call>\n<tool_call>\n{{\"name\": \"g\", \"arguments\": {{}}}}\n</tool_call>");
        let calls = read_calls(&two, ToolMode::Required, &[]).expect("two calls");
        let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["f", "g"]);
        assert_eq!(calls[0].arguments, r#"{"a":1}"#);
        let auto = format!("<tool_call>\n{two}");
        assert_eq!(read_calls(&auto, ToolMode::Auto, &[]).map(|c| c.len()), Some(2));
        assert_eq!(read_call(one, ToolMode::Required, &[]).map(|c| c.name), Some("f".to_string()));
        assert!(read_call(&two, ToolMode::Required, &[]).is_none(), "two calls are not one");
        let cut = format!("{one}\n</tool_call>\n<tool_call>\n{{\"name\": \"g\"");
        assert!(read_calls(&cut, ToolMode::Required, &[]).is_none(), "a cut call makes the answer text");
        assert!(read_calls("hello", ToolMode::Auto, &[]).is_none());
    }

    #[test]
    fn xml_calls_are_read_typed_whole_or_cut_beside_hermes_ones() {
        let schemas = vec![("f".to_string(), json!({"properties": {"a": {"type": "string"}}}))];
        let call = "<function=f>\n<parameter=a>\n1\n</parameter>\n</function>";
        let two = format!("{call}\n</tool_call>\n<tool_call>\n{call}\n</tool_call>");
        let calls = read_calls(&two, ToolMode::Required, &schemas).expect("two calls");
        assert_eq!(calls.len(), 2);
        assert_eq!((calls[0].name.as_str(), calls[0].arguments.as_str()), ("f", r#"{"a":"1"}"#));
        assert_eq!(read_calls(&format!("<tool_call>\n{two}"), ToolMode::Auto, &schemas).map(|c| c.len()), Some(2));
        assert_eq!(
            read_calls(call, ToolMode::Required, &[]).map(|c| c[0].arguments.clone()),
            Some(r#"{"a":1}"#.into())
        );
        for cut in [format!("{call}\n</tool_call>\n<tool_call>\n<function=f>\n<param"), format!("{call}\n</tool_")] {
            assert!(read_calls(&cut, ToolMode::Required, &schemas).is_none(), "{cut:?}");
            let (calls, finish) = answer_calls(&cut, ToolMode::Required, "length", &schemas).expect("the whole one");
            assert_eq!((calls.len(), finish), (1, "length"), "{cut:?}");
        }
        assert!(answer_calls("<function=f>\n<param", ToolMode::Required, "length", &schemas).is_none());
        assert!(read_calls(&format!("{call}\nwords"), ToolMode::Required, &schemas).is_none());
        assert_eq!(CallFormat::of_template("x <function=NAME> <parameter=K> x"), CallFormat::Xml);
    }

    #[test]
    fn calls_cut_by_max_tokens_keep_the_whole_ones_and_say_length() {
        let one = r#"{"name": "f", "arguments": {"a": 1}}"#;
        let next = "\n</tool_call>\n<tool_call>\n";
        let names = |answer: Option<(Vec<Call>, &'static str)>| {
            answer.map(|(calls, finish)| (calls.into_iter().map(|c| c.name).collect::<Vec<_>>(), finish))
        };
        let whole = format!("{one}{next}{}", one.replace('f', "g"));
        assert_eq!(
            names(answer_calls(&whole, ToolMode::Required, "stop", &[])),
            Some((vec!["f".into(), "g".into()], "tool_calls"))
        );
        for cut in [
            format!("{one}{next}{{\"name\": \"g\", \"argu"),
            format!("{one}{next}"),
            format!("{one}\n</tool_"),
            format!("{one}\n</tool_call>\n<tool"),
            format!("<tool_call>\n{one}{next}{{\"name\""),
        ] {
            let mode = if cut.starts_with('<') { ToolMode::Auto } else { ToolMode::Required };
            assert_eq!(names(answer_calls(&cut, mode, "length", &[])), Some((vec!["f".into()], "length")), "{cut:?}");
            assert!(answer_calls(&cut, mode, "stop", &[]).is_none(), "cut, not by max_tokens: text; {cut:?}");
        }
        let first_cut = r#"{"name": "f", "argu"#;
        assert!(answer_calls(first_cut, ToolMode::Required, "length", &[]).is_none(), "no whole call: text");
        assert!(
            answer_calls(&format!("{one}\nwords"), ToolMode::Required, "length", &[]).is_none(),
            "not tags after it"
        );
    }

    /// As llama-server (its chat parser takes the thinking first, then
    /// reads calls only from what follows it): a call written inside the
    /// thinking is part of `reasoning_content`, not a call; one after the
    /// thinking is read.
    #[test]
    fn a_call_written_inside_the_thinking_is_reasoning_not_a_call() {
        use baton_gen::openai::reasoning::ReasoningSplit;
        let call = r#"<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>"#;
        let answered = |text: &str, opened: bool| {
            let split = ReasoningSplit::whole(text, opened);
            (split.reasoning.clone(), answer_calls(&split.content, ToolMode::Auto, "stop", &[]).map(|(c, _)| c.len()))
        };
        for (text, opened) in [
            (format!("<think>I will call it: {call}</think>\nDone."), false),
            (format!("<think>{call} and more"), false),
            (format!("still thinking {call}</think>"), true),
        ] {
            let (reasoning, calls) = answered(&text, opened);
            assert_eq!(calls, None, "{text:?}");
            assert!(reasoning.contains(call), "the call stays in the thinking: {text:?} gave {reasoning:?}");
        }
        let (_, calls) = answered(&format!("<think>Needs f.</think>\n{call}"), false);
        assert_eq!(calls, Some(1), "a call after the thinking is read");
        // Harmony: a recipient inside the analysis channel is thinking too.
        let analysis = "<|channel|>analysis<|message|>call to=functions.f <|constrain|>json<|message|>{}";
        assert_eq!(answered(analysis, false).1, None);
    }

    /// A file without a template whose vocabulary is Gemma 4's gets Gemma
    /// 4's turns: its tools are declared in the system turn, a required
    /// call opens with `<|tool_call>`, and its calls are read back.
    #[test]
    fn a_gemma4_fallback_prompt_declares_the_tools_in_its_system_turn() {
        use baton_model::baton_tokenizer::{synthetic_gemma4, Tokenizer};
        let tokenizer = Tokenizer::from_config(&synthetic_gemma4(512)).expect("tokenizer");
        let template = baton_gen::ChatTemplate::for_tokenizer(None, &tokenizer).expect("fallback");
        let calls = CallFormat::of_template(template.source());
        assert_eq!(calls, CallFormat::Gemma4);
        let tools = json!([{"type": "function", "function": {"name": "f", "description": "Finds",
            "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}}}]);
        let plan = plan(Some(&tools), Some(&json!("required")), false, calls).expect("plan").expect("a call");
        assert_eq!(plan.opening(), ("<|tool_call>".to_string(), true));
        let messages = with_tools(vec![Message::user("Hi")], &plan);
        let prompt = template.render(&messages, true).expect("render");
        let declared = r#"<|turn>system
<|tool>declaration:f{description:<|"|>Finds<|"|>,parameters:{properties:{a:{type:<|"|>string<|"|>}},type:<|"|>object<|"|>}}<tool|>"#;
        assert!(prompt.contains(declared), "{prompt}");
        assert!(prompt.ends_with("<|turn>user\nHi<turn|>\n<|turn>model\n"), "{prompt}");
        let answered = r#"call:f{a:<|"|>x<|"|>}<tool_call|>"#;
        let read = read_calls(answered, ToolMode::Required, &[]).expect("a call");
        assert_eq!((read[0].name.as_str(), read[0].arguments.as_str()), ("f", r#"{"a":"x"}"#));
    }

    /// `text`, an answer that thinks and then calls `names`, streamed cut
    /// at every byte: the split gives the same thinking and answer as the
    /// whole text, the answer is held back at every cut while it may be a
    /// call (nothing of it is sent as words), and it reads as the same
    /// calls.
    fn assert_every_cut_reads_as_the_whole(text: &str, names: &[&str]) {
        use baton_gen::openai::reasoning::ReasoningSplit;
        let whole = ReasoningSplit::whole(text, false);
        let want = answer_calls(&whole.content, ToolMode::Auto, "stop", &[]).expect("calls");
        assert_eq!(want.0.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), names);
        for cut in (1..text.len()).filter(|&i| text.is_char_boundary(i)) {
            let mut split = ReasoningSplit::new(false);
            let (mut reasoning, mut content) = (String::new(), String::new());
            for piece in [&text[..cut], &text[cut..]] {
                let part = split.push(piece);
                reasoning.push_str(&part.reasoning);
                content.push_str(&part.content);
                assert!(may_be_call(&content), "cut {cut}: {content:?} would be sent as words");
            }
            let last = split.finish();
            reasoning.push_str(&last.reasoning);
            content.push_str(&last.content);
            assert_eq!((reasoning.as_str(), content.as_str()), (whole.reasoning.as_str(), whole.content.as_str()));
            assert_eq!(answer_calls(&content, ToolMode::Auto, "stop", &[]), Some(want.clone()), "cut {cut}");
        }
    }

    #[test]
    fn a_gemma4_call_streamed_cut_anywhere_is_held_and_read_as_the_whole_one() {
        let call = r#"<|tool_call>call:get_time{zone:<|"|>UTC<|"|>}<tool_call|><|tool_call>call:f{}<tool_call|>"#;
        assert_every_cut_reads_as_the_whole(
            &format!("<|channel>thought\nThe time, then f.<channel|>{call}"),
            &["get_time", "f"],
        );
        assert!(!may_be_call("<|tool_cat"), "words part from the tag at their first letter");
    }

    /// The calls `"auto"`'s lazy grammar holds on gpt-oss, after its
    /// analysis: on the commentary channel, or with the recipient in the
    /// role's header.
    #[test]
    fn a_harmony_call_after_the_analysis_streamed_cut_anywhere_is_read_as_the_whole_one() {
        let analysis = "<|channel|>analysis<|message|>Needs the time.<|end|>";
        for call in [
            r#"<|start|>assistant<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{"zone": "UTC"}"#,
            r#"<|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>{"zone": "UTC"}<|call|>"#,
        ] {
            assert_every_cut_reads_as_the_whole(&format!("{analysis}{call}"), &["get_time"]);
        }
    }

    #[test]
    fn parallel_tool_calls_is_a_boolean_or_null() {
        assert!(!parallel(None).expect("absent"));
        assert!(!parallel(Some(&Value::Null)).expect("null"));
        assert!(parallel(Some(&json!(true))).expect("true"));
        assert!(!parallel(Some(&json!(false))).expect("false"));
        for bad in [json!("false"), json!(0), json!([])] {
            assert_eq!(parallel(Some(&bad)).expect_err("not a boolean").status, 400, "{bad}");
        }
    }
}
