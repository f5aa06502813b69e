//! Earlier tool calls and their results written back into a conversation
//! in the format the model calls tools in.
//!
//! Hermes (and harmony, whose files carry their own template, which Baton
//! renders from each message's role and text only): the calls as
//! `<tool_call>{…}</tool_call>` in the assistant's text, the results as a
//! user turn (one for results in a row) in `<tool_response>` tags, which
//! every template takes.
//!
//! The XML form (Qwen 3.5): the calls as `<tool_call>` blocks of
//! `<function=NAME>` and `<parameter=KEY>` lines, the results as Hermes's.
//!
//! Gemma 4: the calls as `<|tool_call>call:NAME{…}<tool_call|>` in the
//! model's turn, and each result after them in the same turn as
//! `<|tool_response>response:NAME{…}<tool_response|>` (an object's members,
//! or any other value as `value`), named after the call it answers (its
//! `tool_call_id`, else the calls in order), as Gemma 4's template writes
//! them; the generation prompt then opens a new model turn, as llama.cpp
//! does when a template closed the turn.

use baton_gen::constraint::{gemma4_call, gemma4_value, xml_call, TOOL_CALL_CLOSE, TOOL_CALL_OPEN};
use baton_gen::Message;
use serde_json::{json, Value};

use super::error::ApiError;
use super::tools::{earlier_calls, written_calls, written_result, CallFormat, EarlierCall};

/// What opens a result in Gemma 4's model turn.
const GEMMA4_RESPONSE_OPEN: &str = "<|tool_response>response:";

/// What closes it.
const GEMMA4_RESPONSE_CLOSE: &str = "<tool_response|>";

/// A conversation's turns as they are added, earlier calls and results
/// written in the model's format.
pub struct History {
    format: CallFormat,
    messages: Vec<Message>,
    /// The last assistant message's calls, each whether it was answered.
    calls: Vec<(EarlierCall, bool)>,
    /// Whether the last turn added is results.
    after_result: bool,
}

impl History {
    /// An empty conversation whose model calls tools in `format`.
    pub fn new(format: CallFormat) -> History {
        History { format, messages: Vec::new(), calls: Vec::new(), after_result: false }
    }

    /// Adds a message.
    pub fn push(&mut self, message: Message) {
        self.messages.push(message);
        self.calls.clear();
        self.after_result = false;
    }

    /// Adds a message that follows tool results in the same turn of the
    /// client's (Anthropic's tool_result blocks, then text): in the
    /// results' user turn, after them, where results are a user turn.
    pub fn push_after_results(&mut self, message: Message) {
        match self.messages.last_mut() {
            Some(last) if self.after_result && last.role == message.role && self.format != CallFormat::Gemma4 => {
                last.content = format!("{}\n{}", last.content, message.content);
                self.after_result = false;
            }
            _ => self.push(message),
        }
    }

    /// Adds earlier `tool_calls` (chat completions' shape): written after
    /// the assistant's message added last, or as an assistant message of
    /// their own after anything else.
    pub fn push_calls(&mut self, calls: &Value) -> Result<(), ApiError> {
        let joins = !self.after_result && self.messages.last().is_some_and(|m| m.role == "assistant");
        if !joins {
            self.push(Message::assistant(""));
        }
        let written = match self.format {
            CallFormat::Gemma4 => {
                let calls = earlier_calls(calls)?;
                let written = calls.iter().map(|call| gemma4_call(&call.name, &call.arguments)).collect();
                self.calls.extend(calls.into_iter().map(|call| (call, false)));
                written
            }
            CallFormat::Xml => {
                let written: Vec<String> = earlier_calls(calls)?
                    .iter()
                    .map(|call| {
                        format!("{TOOL_CALL_OPEN}\n{}\n{TOOL_CALL_CLOSE}", xml_call(&call.name, &call.arguments))
                    })
                    .collect();
                written.join("\n")
            }
            CallFormat::Hermes | CallFormat::Harmony => written_calls(calls)?,
        };
        if let Some(last) = self.messages.last_mut() {
            let joiner = if last.content.is_empty() || self.format == CallFormat::Gemma4 { "" } else { "\n" };
            last.content = format!("{}{joiner}{written}", last.content);
        }
        Ok(())
    }

    /// Adds a tool's result `content`, answering the call `call_id` (or
    /// the next one not answered).
    pub fn push_result(&mut self, content: &str, call_id: Option<&str>) {
        let last_is_the_model = self.messages.last().is_some_and(|m| m.role == "assistant");
        match self.format {
            CallFormat::Gemma4 if last_is_the_model => {
                let name = self.answered_name(call_id);
                let response = match serde_json::from_str::<Value>(content) {
                    Ok(object @ Value::Object(_)) => object,
                    Ok(other) => json!({"value": other}),
                    Err(_) => json!({"value": content}),
                };
                let written = format!("{GEMMA4_RESPONSE_OPEN}{name}{}{GEMMA4_RESPONSE_CLOSE}", gemma4_value(&response));
                if let Some(last) = self.messages.last_mut() {
                    last.content.push_str(&written);
                }
            }
            _ => {
                let result = written_result(content);
                match self.messages.last_mut() {
                    Some(last) if self.after_result => last.content = format!("{}\n{result}", last.content),
                    _ => self.messages.push(Message::user(result)),
                }
                self.after_result = true;
            }
        }
    }

    /// The name of the call a result answers: the one with `call_id`,
    /// else the first one not answered (else `call_id` itself).
    fn answered_name(&mut self, call_id: Option<&str>) -> String {
        let by_id = call_id.and_then(|id| self.calls.iter().position(|(c, _)| c.id.as_deref() == Some(id)));
        match by_id.or_else(|| self.calls.iter().position(|(_, answered)| !answered)) {
            Some(i) => {
                self.calls[i].1 = true;
                self.calls[i].0.name.clone()
            }
            None => call_id.unwrap_or("unknown").to_string(),
        }
    }

    /// The conversation.
    pub fn messages(self) -> Vec<Message> {
        self.messages
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conversation(format: CallFormat) -> Vec<Message> {
        let calls = json!([{"id": "c1", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}},
            {"id": "c2", "function": {"name": "get_time", "arguments": {"zone": "UTC"}}}]);
        let mut history = History::new(format);
        history.push(Message::user("Weather and time?"));
        history.push_calls(&calls).expect("calls");
        history.push_result("12:00", Some("c2"));
        history.push_result("{\"temp\": 3}", None);
        history.messages()
    }

    #[test]
    fn gemma4_calls_and_their_results_are_written_in_the_model_turn() {
        let messages = conversation(CallFormat::Gemma4);
        assert_eq!(messages.len(), 2, "{messages:?}");
        let q = "<|\"|>";
        let want = format!(
            "<|tool_call>call:get_weather{{city:{q}Oslo{q}}}<tool_call|><|tool_call>call:get_time{{zone:{q}UTC{q}}}<tool_call|>\
             <|tool_response>response:get_time{{value:{q}12:00{q}}}<tool_response|>\
             <|tool_response>response:get_weather{{temp:3}}<tool_response|>"
        );
        // The first result names its call by id; the second, without
        // one, the first call not answered.
        assert_eq!(messages[1].content, want);
    }

    #[test]
    fn hermes_results_in_a_row_are_one_user_turn() {
        let messages = conversation(CallFormat::Hermes);
        let roles: Vec<&str> = messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        assert!(messages[1].content.starts_with("<tool_call>\n{"), "{messages:?}");
        assert!(messages[1].content.contains("\"name\":\"get_weather\""), "{messages:?}");
        assert_eq!(
            messages[2].content,
            "<tool_response>\n12:00\n</tool_response>\n<tool_response>\n{\"temp\": 3}\n</tool_response>"
        );
    }

    #[test]
    fn xml_calls_are_written_in_their_form_and_results_as_hermes_ones() {
        let messages = conversation(CallFormat::Xml);
        let roles: Vec<&str> = messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        assert_eq!(
            messages[1].content,
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>\n\
             <tool_call>\n<function=get_time>\n<parameter=zone>\nUTC\n</parameter>\n</function>\n</tool_call>"
        );
        assert!(messages[2].content.starts_with("<tool_response>\n12:00\n</tool_response>"), "{messages:?}");
    }
}
