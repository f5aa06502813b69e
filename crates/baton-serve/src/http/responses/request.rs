//! The Responses request (the fields Baton reads) and its input turned
//! into chat completions' terms: the messages as the chat template takes
//! them, the tools, the tool choice and `response_format` in chat
//! completions' shapes, and the generation parameters.

use baton_gen::Message;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::http::error::ApiError;
use crate::http::history::{History, HistoryForm};
use crate::http::reply::type_name;
use crate::http::routes::Conversation;
use crate::http::types::{null_is_false, CommonParams, Params};

/// `POST /v1/responses`. Unknown fields (`metadata`, `reasoning`,
/// `parallel_tool_calls`, `truncation`…) are ignored.
#[derive(Debug, Clone, Deserialize)]
pub struct ResponsesRequest {
    /// A string (one user message) or a list of items.
    pub input: Value,
    /// A system message put before the input.
    pub instructions: Option<String>,
    /// Most tokens to generate.
    pub max_output_tokens: Option<u64>,
    /// Function tools: `{"type": "function", "name", "description",
    /// "parameters"}`.
    pub tools: Option<Value>,
    /// `"none"`, `"auto"`, `"required"` or `{"type": "function", "name"}`.
    pub tool_choice: Option<Value>,
    /// `{"format": {"type": "text" | "json_object" | "json_schema", …}}`.
    pub text: Option<Value>,
    /// Refused: no response is kept to continue from.
    pub previous_response_id: Option<Value>,
    /// `true` is refused: no response is kept.
    pub store: Option<Value>,
    /// llama-server's `timings_per_token`: a stream's text deltas and its
    /// last event carry the `timings` so far.
    #[serde(default, deserialize_with = "null_is_false")]
    pub timings_per_token: bool,
    /// llama-server's `return_progress`: a stream tells how far reading
    /// the prompt got (`response.in_progress` events with
    /// `prompt_progress`).
    #[serde(default, deserialize_with = "null_is_false")]
    pub return_progress: bool,
    /// `model`, `temperature`, `top_p`, `seed`, `stream`.
    #[serde(flatten)]
    pub common: CommonParams,
}

/// What is wrong with a Responses request: `index` is the input item's,
/// `part` the content part's, `found` what was sent, `why` what is
/// missing.
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum ResponsesError {
    /// `previous_response_id` is given.
    #[error("previous_response_id is not served: no response is stored; send the whole conversation in `input`")]
    PreviousResponse,
    /// `store: true`.
    #[error("store: true is not served: no response is stored (send store: false, or leave it out)")]
    Store,
    /// `input` is neither a string nor a list of items, or is empty.
    #[error("input: a string or a non-empty list of items, not {found}")]
    Input { found: String },
    /// An item of a type that is not served.
    #[error("input[{index}]: items of type {kind} are not served (message, function_call, function_call_output)")]
    ItemType { index: usize, kind: String },
    /// A message item's role is not one of the four.
    #[error("input[{index}].role: {role}: \"user\", \"assistant\", \"system\" or \"developer\"")]
    Role { index: usize, role: String },
    /// A content part that is not text.
    #[error("input[{index}].content[{part}]: parts of type {kind} are not served (input_text, output_text)")]
    PartType { index: usize, part: usize, kind: String },
    /// An item without what it needs.
    #[error("input[{index}]: {why}")]
    Item { index: usize, why: String },
    /// `tools` is not a list of function tools.
    #[error("tools: {why}")]
    Tools { why: String },
    /// `tool_choice` is not one of the Responses API's.
    #[error("tool_choice: {found}: \"none\", \"auto\", \"required\" or {{\"type\": \"function\", \"name\": …}}")]
    ToolChoice { found: String },
    /// `text.format` is not one of the three.
    #[error("text.format: {found}: {{\"type\": \"text\" | \"json_object\"}} or {{\"type\": \"json_schema\", \"schema\": …}}")]
    Format { found: String },
}

impl ResponsesError {
    /// The request field at fault.
    fn param(&self) -> &'static str {
        match self {
            ResponsesError::PreviousResponse => "previous_response_id",
            ResponsesError::Store => "store",
            ResponsesError::Input { .. }
            | ResponsesError::ItemType { .. }
            | ResponsesError::Role { .. }
            | ResponsesError::PartType { .. }
            | ResponsesError::Item { .. } => "input",
            ResponsesError::Tools { .. } => "tools",
            ResponsesError::ToolChoice { .. } => "tool_choice",
            ResponsesError::Format { .. } => "text",
        }
    }
}

impl From<ResponsesError> for ApiError {
    fn from(e: ResponsesError) -> ApiError {
        ApiError::invalid_param(e.param(), e.to_string())
    }
}

impl ResponsesRequest {
    /// The conversation (tools and choice included) and the generation
    /// parameters, checked.
    pub(super) fn conversation(&self, form: impl Into<HistoryForm>) -> Result<(Conversation, Params), ResponsesError> {
        if self.previous_response_id.as_ref().is_some_and(|v| !v.is_null()) {
            return Err(ResponsesError::PreviousResponse);
        }
        if self.store.as_ref().and_then(Value::as_bool) == Some(true) {
            return Err(ResponsesError::Store);
        }
        let mut history = History::new(form);
        if let Some(instructions) = &self.instructions {
            history.push(Message::system(instructions.clone()));
        }
        match &self.input {
            Value::String(text) => history.push(Message::user(text.clone())),
            Value::Array(items) if !items.is_empty() => items_into(items, &mut history)?,
            other => return Err(ResponsesError::Input { found: other.to_string() }),
        }
        let mut messages = history.messages();
        // One system message: the instructions and the input's own.
        if messages.len() > 1 && messages[0].role == "system" && messages[1].role == "system" {
            let second = messages.remove(1);
            messages[0].content = format!("{}\n\n{}", messages[0].content, second.content);
        }
        let response_format = self.format()?;
        let params = Params {
            max_tokens: self.max_output_tokens,
            response_format,
            timings_per_token: self.timings_per_token,
            return_progress: self.return_progress,
            ..self.common.params()
        };
        Ok((Conversation { messages, tools: self.tools()?, choice: self.choice()? }, params))
    }

    /// The function tools in chat completions' shape.
    fn tools(&self) -> Result<Option<Value>, ResponsesError> {
        let list = match &self.tools {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Array(list)) => list,
            Some(other) => return Err(ResponsesError::Tools { why: format!("{other}: a list of function tools") }),
        };
        let mut tools = Vec::with_capacity(list.len());
        for (index, tool) in list.iter().enumerate() {
            let bad = |why: String| ResponsesError::Tools { why: format!("tools[{index}]: {why}") };
            match tool.get("type").and_then(Value::as_str) {
                Some("function") => {}
                other => return Err(bad(format!("type {other:?}: only function tools are served"))),
            }
            // Chat completions' nesting passes as it is.
            if tool.get("function").is_some() {
                tools.push(tool.clone());
                continue;
            }
            let name = tool.get("name").ok_or_else(|| bad("name is missing".into()))?;
            let mut function = json!({"name": name});
            for key in ["description", "parameters"] {
                if let Some(value) = tool.get(key).filter(|v| !v.is_null()) {
                    function[key] = value.clone();
                }
            }
            tools.push(json!({"type": "function", "function": function}));
        }
        Ok(Some(Value::Array(tools)))
    }

    /// The tool choice in chat completions' shape.
    fn choice(&self) -> Result<Option<Value>, ResponsesError> {
        let bad = |found: &Value| ResponsesError::ToolChoice { found: found.to_string() };
        match &self.tool_choice {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if ["none", "auto", "required"].contains(&s.as_str()) => Ok(Some(json!(s))),
            Some(choice) if choice.get("type").and_then(Value::as_str) == Some("function") => {
                let name = choice.get("name").and_then(Value::as_str).ok_or_else(|| bad(choice))?;
                Ok(Some(json!({"type": "function", "function": {"name": name}})))
            }
            Some(other) => Err(bad(other)),
        }
    }

    /// `text.format` as chat completions' `response_format`.
    fn format(&self) -> Result<Option<Value>, ResponsesError> {
        let Some(format) = self.text.as_ref().and_then(|t| t.get("format")).filter(|f| !f.is_null()) else {
            return Ok(None);
        };
        let bad = || ResponsesError::Format { found: format.to_string() };
        match format.get("type").and_then(Value::as_str) {
            Some("text") => Ok(None),
            Some("json_object") => Ok(Some(json!({"type": "json_object"}))),
            Some("json_schema") => {
                let mut spec = json!({"schema": format.get("schema").cloned().unwrap_or(Value::Bool(true))});
                if let Some(name) = format.get("name") {
                    spec["name"] = name.clone();
                }
                Ok(Some(json!({"type": "json_schema", "json_schema": spec})))
            }
            _ => Err(bad()),
        }
    }
}

/// The input's items as turns: function calls written into the
/// assistant's turn, their outputs as the model's format has them (see
/// [`History`]); reasoning items are skipped.
fn items_into(items: &[Value], history: &mut History) -> Result<(), ResponsesError> {
    for (index, item) in items.iter().enumerate() {
        let bad = |why: &str| ResponsesError::Item { index, why: why.to_string() };
        let kind = match item.get("type").and_then(Value::as_str) {
            None if item.get("role").is_some() => Some("message"),
            kind => kind,
        };
        match kind {
            Some("message") => {
                let role = match item.get("role").and_then(Value::as_str) {
                    Some("developer") => "system",
                    Some(role @ ("user" | "assistant" | "system")) => role,
                    other => return Err(ResponsesError::Role { index, role: format!("{other:?}") }),
                };
                history.push(Message::new(role, content(index, item.get("content"))?));
            }
            Some("function_call") => {
                let name =
                    item.get("name").and_then(Value::as_str).ok_or_else(|| bad("a function_call's name is missing"))?;
                let arguments = item.get("arguments").cloned().unwrap_or_else(|| json!("{}"));
                let call = json!([{"id": item.get("call_id"), "function": {"name": name, "arguments": arguments}}]);
                history.push_calls(&call).map_err(|e| bad(&e.body.message))?;
            }
            Some("function_call_output") => {
                let output = match item.get("output") {
                    Some(Value::String(text)) => text.clone(),
                    Some(parts @ Value::Array(_)) => content(index, Some(parts))?,
                    _ => return Err(bad("a function_call_output's output is a string")),
                };
                history.push_result(&output, item.get("call_id").and_then(Value::as_str));
            }
            Some("reasoning") => {}
            other => {
                return Err(ResponsesError::ItemType { index, kind: type_name(other) });
            }
        }
    }
    Ok(())
}

/// A message's content: a string, or text parts joined.
fn content(index: usize, content: Option<&Value>) -> Result<String, ResponsesError> {
    match content {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(text)) => Ok(text.clone()),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            for (part, value) in parts.iter().enumerate() {
                let kind = value.get("type").and_then(Value::as_str);
                match (kind, value.get("text").and_then(Value::as_str)) {
                    (Some("input_text" | "output_text" | "text"), Some(t)) => text.push_str(t),
                    (kind, _) => {
                        return Err(ResponsesError::PartType { index, part, kind: type_name(kind) });
                    }
                }
            }
            Ok(text)
        }
        Some(other) => {
            Err(ResponsesError::Item { index, why: format!("content {other}: a string or a list of parts") })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::tools::CallFormat;

    fn request(json: Value) -> ResponsesRequest {
        serde_json::from_value(json).expect("a request")
    }

    #[test]
    fn items_calls_and_outputs_become_turns() {
        let r = request(json!({"instructions": "Be brief.", "input": [
            {"role": "developer", "content": "Use tools."},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "weather?"}]},
            {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "3 C"},
            {"type": "function_call_output", "call_id": "call_2", "output": "4 C"},
        ]}));
        let (c, _) = r.conversation(CallFormat::Hermes).expect("valid");
        let roles: Vec<&str> = c.messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
        assert_eq!(c.messages[0].content, "Be brief.\n\nUse tools.");
        assert!(c.messages[2].content.contains(r#""arguments":{"city":"Oslo"}"#), "{}", c.messages[2].content);
        assert_eq!(
            c.messages[3].content,
            "<tool_response>\n3 C\n</tool_response>\n<tool_response>\n4 C\n</tool_response>"
        );
        // Gemma 4's: the outputs in the model's turn after its call, each
        // named after the call it answers (an unknown one by its id).
        let (c, _) = r.conversation(CallFormat::Gemma4).expect("valid");
        let roles: Vec<&str> = c.messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant"]);
        let q = "<|\"|>";
        assert_eq!(
            c.messages[2].content,
            format!(
                "<|tool_call>call:get_weather{{city:{q}Oslo{q}}}<tool_call|>\
                 <|tool_response>response:get_weather{{value:{q}3 C{q}}}<tool_response|>\
                 <|tool_response>response:call_2{{value:{q}4 C{q}}}<tool_response|>"
            )
        );
    }

    #[test]
    fn tools_choice_and_format_map_to_chat_completions() {
        let r = request(json!({"input": "x", "max_output_tokens": 9,
            "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
            "tool_choice": {"type": "function", "name": "f"},
            "text": {"format": {"type": "json_schema", "name": "n", "schema": {"type": "object"}}}}));
        let (c, params) = r.conversation(CallFormat::Hermes).expect("valid");
        assert_eq!(
            c.tools,
            Some(json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]))
        );
        assert_eq!(c.choice, Some(json!({"type": "function", "function": {"name": "f"}})));
        assert_eq!(
            params.response_format,
            Some(json!({"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "object"}}}))
        );
        assert_eq!(params.max_tokens, Some(9));
    }

    #[test]
    fn wrong_shapes_name_what_is_wrong() {
        for (json, param, says) in [
            (json!({"input": []}), "input", "non-empty"),
            (json!({"input": 3}), "input", "string"),
            (json!({"input": [{"type": "web_search_call"}]}), "input", "\"web_search_call\""),
            (json!({"input": [{"role": "tool", "content": "x"}]}), "input", "role"),
            (
                json!({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}),
                "input",
                "input_image",
            ),
            (json!({"input": "x", "previous_response_id": "resp_1"}), "previous_response_id", "stored"),
            (json!({"input": "x", "store": true}), "store", "stored"),
            (json!({"input": "x", "tools": [{"type": "web_search"}]}), "tools", "function tools"),
            (json!({"input": "x", "tool_choice": {"type": "mcp"}}), "tool_choice", "required"),
            (json!({"input": "x", "text": {"format": {"type": "yaml"}}}), "text", "json_schema"),
        ] {
            let e = ApiError::from(request(json.clone()).conversation(CallFormat::Hermes).expect_err("refused"));
            assert_eq!((e.status.as_u16(), e.body.param), (400, Some(param)), "{json}");
            assert!(e.body.message.contains(says), "{json}: {}", e.body.message);
        }
    }
}
