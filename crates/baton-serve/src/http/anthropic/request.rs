//! The Messages request (the fields Baton reads) and its conversation
//! turned into chat completions' terms: the messages as the chat template
//! takes them, the tools and the tool choice in chat completions' shapes,
//! and the generation parameters.

use baton_gen::Message;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::http::error::ApiError;
use crate::http::history::{History, HistoryForm};
use crate::http::reply::type_name;
use crate::http::routes::Conversation;
use crate::http::types::{CommonParams, Params, Stop};

/// `POST /v1/messages` and `/v1/messages/count_tokens` (which needs no
/// `max_tokens`). Unknown fields (`metadata`, `service_tier`…) are
/// ignored.
#[derive(Debug, Clone, Deserialize)]
pub struct MessagesRequest {
    /// Most tokens to generate: required by `/v1/messages`.
    pub max_tokens: Option<u64>,
    /// The system prompt: a string or a list of text blocks.
    pub system: Option<Value>,
    /// The conversation: `user` and `assistant` turns.
    pub messages: Vec<Value>,
    /// Stop strings.
    pub stop_sequences: Option<Vec<String>>,
    /// Keep the `top_k` most likely tokens.
    pub top_k: Option<u64>,
    /// Client tools: `{name, description, input_schema}`.
    pub tools: Option<Value>,
    /// `{"type": "auto" | "any" | "tool" | "none"}`.
    pub tool_choice: Option<Value>,
    /// `model`, `temperature`, `top_p`, `seed`, `stream`.
    #[serde(flatten)]
    pub common: CommonParams,
}

/// What is wrong with a Messages request: `index` is the message's,
/// `block` the content block's, `found` what was sent, `why` what the
/// block or tool lacks.
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum MessagesError {
    /// `max_tokens` is absent.
    #[error("max_tokens is required: the most tokens to generate")]
    MissingMaxTokens,
    /// `system` is neither a string nor text blocks.
    #[error("system: a string or a list of {{\"type\": \"text\", \"text\": …}} blocks")]
    System,
    /// A message's role is not `user` or `assistant`.
    #[error("messages[{index}].role: {role}: \"user\" or \"assistant\" (the system prompt goes in `system`)")]
    Role { index: usize, role: String },
    /// A message's content is neither a string nor a list of blocks.
    #[error("messages[{index}].content: a string or a list of content blocks, not {found}")]
    Content { index: usize, found: String },
    /// A block without a `type`, or of a type that is not served.
    #[error("messages[{index}].content[{block}]: blocks of type {kind} are not served (text, tool_use, tool_result)")]
    BlockType { index: usize, block: usize, kind: String },
    /// A block of a served type without what it needs.
    #[error("messages[{index}].content[{block}]: {why}")]
    Block { index: usize, block: usize, why: String },
    /// A tool that is not a client tool with a name.
    #[error("tools[{index}]: {why}")]
    Tool { index: usize, why: String },
    /// `tools` is not a list.
    #[error("tools: a list of {{\"name\", \"description\", \"input_schema\"}}")]
    Tools,
    /// `tool_choice` is not one of Anthropic's.
    #[error(
        "tool_choice: {found}: {{\"type\": \"auto\" | \"any\" | \"none\"}} or {{\"type\": \"tool\", \"name\": …}}"
    )]
    ToolChoice { found: String },
}

impl MessagesError {
    /// The request field at fault.
    fn param(&self) -> &'static str {
        match self {
            MessagesError::MissingMaxTokens => "max_tokens",
            MessagesError::System => "system",
            MessagesError::Role { .. }
            | MessagesError::Content { .. }
            | MessagesError::BlockType { .. }
            | MessagesError::Block { .. } => "messages",
            MessagesError::Tool { .. } | MessagesError::Tools => "tools",
            MessagesError::ToolChoice { .. } => "tool_choice",
        }
    }
}

impl From<MessagesError> for ApiError {
    fn from(e: MessagesError) -> ApiError {
        ApiError::invalid_param(e.param(), e.to_string())
    }
}

impl MessagesRequest {
    /// The generation parameters (`max_tokens` as given: `count_tokens`
    /// has none).
    pub fn params(&self) -> Params {
        Params {
            max_tokens: self.max_tokens,
            top_k: self.top_k,
            stop: self.stop_sequences.clone().map(Stop::Many),
            ..self.common.params()
        }
    }

    /// The conversation, tools and choice, checked. An empty `messages`
    /// is served as llama-server serves it (the template's generation
    /// prompt after the system prompt, if any), where Anthropic's API
    /// refuses it.
    pub(super) fn conversation(&self, form: impl Into<HistoryForm>) -> Result<Conversation, MessagesError> {
        let mut history = History::new(form);
        match &self.system {
            None | Some(Value::Null) => {}
            Some(Value::String(text)) => history.push(Message::system(text.clone())),
            Some(Value::Array(blocks)) => {
                let text = blocks.iter().map(text_of).collect::<Option<Vec<_>>>().ok_or(MessagesError::System)?;
                history.push(Message::system(text.concat()));
            }
            Some(_) => return Err(MessagesError::System),
        }
        for (index, message) in self.messages.iter().enumerate() {
            turn(index, message, &mut history)?;
        }
        Ok(Conversation { messages: history.messages(), tools: self.tools()?, choice: self.choice()? })
    }

    /// The tools in chat completions' shape.
    fn tools(&self) -> Result<Option<Value>, MessagesError> {
        let list = match &self.tools {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Array(list)) => list,
            Some(_) => return Err(MessagesError::Tools),
        };
        let mut tools = Vec::with_capacity(list.len());
        for (index, tool) in list.iter().enumerate() {
            let bad = |why: &str| MessagesError::Tool { index, why: why.to_string() };
            if !matches!(tool.get("type"), None | Some(Value::Null)) && tool["type"] != "custom" {
                return Err(bad("only client tools ({\"name\", \"description\", \"input_schema\"}) are served"));
            }
            let name = tool.get("name").and_then(Value::as_str).ok_or_else(|| bad("name is missing"))?;
            let mut function = json!({"name": name});
            if let Some(description) = tool.get("description") {
                function["description"] = description.clone();
            }
            if let Some(schema) = tool.get("input_schema") {
                function["parameters"] = schema.clone();
            }
            tools.push(json!({"type": "function", "function": function}));
        }
        Ok(Some(Value::Array(tools)))
    }

    /// The tool choice in chat completions' shape.
    fn choice(&self) -> Result<Option<Value>, MessagesError> {
        let Some(choice) = self.tool_choice.as_ref().filter(|c| !c.is_null()) else { return Ok(None) };
        let bad = || MessagesError::ToolChoice { found: choice.to_string() };
        Ok(Some(match choice.get("type").and_then(Value::as_str).ok_or_else(bad)? {
            "auto" => json!("auto"),
            "any" => json!("required"),
            "none" => json!("none"),
            "tool" => {
                let name = choice.get("name").and_then(Value::as_str).ok_or_else(bad)?;
                json!({"type": "function", "function": {"name": name}})
            }
            _ => return Err(bad()),
        }))
    }
}

/// A text block's text.
fn text_of(block: &Value) -> Option<&str> {
    (block.get("type")? == "text").then(|| block.get("text")?.as_str())?
}

/// One turn into `history`: its text blocks, with the tool calls
/// (assistant) written after them, or the tool results (user) before them.
fn turn(index: usize, message: &Value, history: &mut History) -> Result<(), MessagesError> {
    let role = match message.get("role").and_then(Value::as_str) {
        Some(role @ ("user" | "assistant")) => role,
        other => return Err(MessagesError::Role { index, role: format!("{other:?}") }),
    };
    let blocks = match message.get("content") {
        Some(Value::String(text)) => {
            history.push(Message::new(role, text.clone()));
            return Ok(());
        }
        Some(Value::Array(blocks)) => blocks,
        other => {
            let found = other.map_or_else(|| "nothing".to_string(), Value::to_string);
            return Err(MessagesError::Content { index, found });
        }
    };
    let (mut text, mut calls, mut results) = (String::new(), Vec::new(), Vec::new());
    let mut thinking = String::new();
    for (block, value) in blocks.iter().enumerate() {
        let bad = |why: &str| MessagesError::Block { index, block, why: why.to_string() };
        match (value.get("type").and_then(Value::as_str), role) {
            (Some("text"), _) => text.push_str(text_of(value).ok_or_else(|| bad("a text block's text is missing"))?),
            (Some("tool_use"), "assistant") => {
                let name = value.get("name").and_then(Value::as_str).ok_or_else(|| bad("tool_use without a name"))?;
                let input = value.get("input").cloned().unwrap_or_else(|| json!({}));
                calls.push(json!({"id": value.get("id"), "function": {"name": name, "arguments": input}}));
            }
            (Some("tool_result"), "user") => {
                let content = match value.get("content") {
                    None | Some(Value::Null) => String::new(),
                    Some(Value::String(text)) => text.clone(),
                    Some(Value::Array(parts)) => parts
                        .iter()
                        .map(text_of)
                        .collect::<Option<Vec<_>>>()
                        .ok_or_else(|| bad("a tool_result's content is a string or text blocks"))?
                        .concat(),
                    Some(_) => return Err(bad("a tool_result's content is a string or text blocks")),
                };
                let failed = value.get("is_error").and_then(Value::as_bool) == Some(true);
                let id = value.get("tool_use_id").and_then(Value::as_str);
                results.push((if failed { format!("Error: {content}") } else { content }, id));
            }
            (Some("tool_use"), _) => return Err(bad("tool_use blocks are the assistant's")),
            (Some("tool_result"), _) => return Err(bad("tool_result blocks are the user's")),
            // An earlier answer's reasoning, for a template that reads it
            // (`reasoning_content`); a redacted one is not read back.
            (Some("thinking"), "assistant") => {
                thinking.push_str(value.get("thinking").and_then(Value::as_str).unwrap_or_default());
            }
            (Some("thinking" | "redacted_thinking"), _) => {}
            (kind, _) => {
                return Err(MessagesError::BlockType { index, block, kind: type_name(kind) });
            }
        }
    }
    for (content, id) in &results {
        history.push_result(content, *id);
    }
    if !text.is_empty() || results.is_empty() {
        let mut message = Message::new(role, text);
        if !thinking.is_empty() {
            message = message.with_field("reasoning_content", Value::from(thinking));
        }
        history.push_after_results(message);
    }
    if !calls.is_empty() {
        history.push_calls(&Value::Array(calls)).map_err(|e| MessagesError::Block {
            index,
            block: 0,
            why: e.body.message,
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::tools::CallFormat;

    fn request(json: Value) -> MessagesRequest {
        serde_json::from_value(json).expect("a request")
    }

    #[test]
    fn system_blocks_calls_and_results_become_turns() {
        let r = request(json!({"max_tokens": 5, "system": [{"type": "text", "text": "Be brief."}], "messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": [{"type": "text", "text": "Let me see."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "3 C"},
                {"type": "text", "text": "and?"}]},
        ]}));
        let c = r.conversation(CallFormat::Hermes).expect("valid");
        let roles: Vec<&str> = c.messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
        assert_eq!(c.messages[0].content, "Be brief.");
        assert!(c.messages[2].content.starts_with("Let me see.\n<tool_call>"), "{}", c.messages[2].content);
        assert!(c.messages[2].content.contains(r#""arguments":{"city":"Oslo"}"#), "{}", c.messages[2].content);
        assert_eq!(c.messages[3].content, "<tool_response>\n3 C\n</tool_response>\nand?");
        // Gemma 4's: the result in the model's turn after its call, the
        // user's text a turn of its own.
        let c = r.conversation(CallFormat::Gemma4).expect("valid");
        let roles: Vec<&str> = c.messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
        let q = "<|\"|>";
        assert_eq!(
            c.messages[2].content,
            format!(
                "Let me see.<|tool_call>call:get_weather{{city:{q}Oslo{q}}}<tool_call|>\
                 <|tool_response>response:get_weather{{value:{q}3 C{q}}}<tool_response|>"
            )
        );
        assert_eq!(c.messages[3].content, "and?");
    }

    #[test]
    fn tools_and_choices_map_to_chat_completions() {
        let r = request(json!({"messages": [{"role": "user", "content": "x"}],
            "tools": [{"name": "f", "description": "d", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "tool", "name": "f"}}));
        let c = r.conversation(CallFormat::Hermes).expect("valid");
        assert_eq!(
            c.tools,
            Some(
                json!([{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}}])
            )
        );
        assert_eq!(c.choice, Some(json!({"type": "function", "function": {"name": "f"}})));
        for (choice, expected) in [("auto", "auto"), ("any", "required"), ("none", "none")] {
            let r = request(json!({"messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": choice}}));
            assert_eq!(r.conversation(CallFormat::Hermes).expect("valid").choice, Some(json!(expected)));
        }
    }

    #[test]
    fn wrong_shapes_name_what_is_wrong() {
        for (json, param, says) in [
            (json!({"messages": [{"role": "system", "content": "x"}]}), "messages", "role"),
            (json!({"messages": [{"role": "user", "content": 3}]}), "messages", "content"),
            (json!({"messages": [{"role": "user", "content": [{"type": "image"}]}]}), "messages", "\"image\""),
            (json!({"messages": [{"role": "user", "content": [{"text": "x"}]}]}), "messages", "(none)"),
            (
                json!({"messages": [{"role": "user", "content": [{"type": "tool_use", "name": "f"}]}]}),
                "messages",
                "assistant's",
            ),
            (json!({"messages": [{"role": "user", "content": "x"}], "system": 3}), "system", "string"),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "bash_20250124", "name": "b"}]}),
                "tools",
                "client tools",
            ),
            (
                json!({"messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "some"}}),
                "tool_choice",
                "auto",
            ),
        ] {
            let e = ApiError::from(request(json.clone()).conversation(CallFormat::Hermes).expect_err("refused"));
            assert_eq!((e.status.as_u16(), e.body.param), (400, Some(param)), "{json}");
            assert!(e.body.message.contains(says), "{json}: {}", e.body.message);
        }
    }
}
