//! Earlier tool calls and their results written back into a conversation
//! in the format the model calls tools in.
//!
//! A template of the model's own (the file's, or one given) that reads
//! `tool_calls` is passed them as fields ([`HistoryForm::Fields`]), as
//! llama.cpp passes them, and writes them in its own syntax: the
//! assistant's `tool_calls` (each `{id, type: "function", function: {name,
//! arguments}}`, the arguments a mapping where they are a JSON object),
//! each result a `tool` message with its `tool_call_id` and the `name` of
//! the call it answers, and an earlier answer's reasoning as
//! `reasoning_content` and `thinking`. For harmony (gpt-oss) an assistant
//! message with calls and reasoning has its text left out, as llama.cpp
//! does (harmony's template takes the reasoning or the text before a
//! call, not both). A Gemma 4 template that reads `tool_responses` is
//! passed each model turn as llama.cpp passes it
//! ([`HistoryForm::Gemma4Turn`]): the calls, their results
//! (`tool_responses`, each `{name, response}`, the response read as JSON
//! where it is) and the answer after them one assistant message.
//!
//! Any other template reads only each message's role and text, so the
//! calls and results are written into the text ([`HistoryForm::Text`]):
//!
//! Hermes (and harmony): the calls as `<tool_call>{…}</tool_call>` in the
//! assistant's text, the results as a user turn (one for results in a
//! row) in `<tool_response>` tags, which every template takes.
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
use baton_gen::{ChatTemplate, Message, TemplateOrigin};
use serde_json::{json, Value};

use super::error::ApiError;
use super::tools::{earlier_calls, written_calls, written_result, CallFormat, EarlierCall};

/// What opens a result in Gemma 4's model turn.
const GEMMA4_RESPONSE_OPEN: &str = "<|tool_response>response:";

/// What closes it.
const GEMMA4_RESPONSE_CLOSE: &str = "<tool_response|>";

/// How earlier calls and their results reach the template (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryForm {
    /// Written into the messages' text in the model's call format.
    Text(CallFormat),
    /// Passed as the fields the template reads; the model calls in this
    /// format.
    Fields(CallFormat),
    /// Gemma 4's model turns, each one assistant message.
    Gemma4Turn,
}

impl HistoryForm {
    /// The form `template` takes: fields for a template of the model's own
    /// (not a fallback) that reads `tool_calls`, else text.
    pub fn of_template(template: &ChatTemplate) -> HistoryForm {
        let calls = CallFormat::of_template(template.source());
        let own = matches!(template.origin(), TemplateOrigin::File | TemplateOrigin::Custom);
        match calls {
            _ if !own || !template.mentions("tool_calls") => HistoryForm::Text(calls),
            CallFormat::Gemma4 if template.mentions("tool_responses") => HistoryForm::Gemma4Turn,
            _ => HistoryForm::Fields(calls),
        }
    }

    /// The format the model writes its calls in.
    pub fn calls(self) -> CallFormat {
        match self {
            HistoryForm::Text(calls) | HistoryForm::Fields(calls) => calls,
            HistoryForm::Gemma4Turn => CallFormat::Gemma4,
        }
    }

    /// Whether the template is passed the calls as fields.
    pub fn is_fields(self) -> bool {
        !matches!(self, HistoryForm::Text(_))
    }
}

impl From<CallFormat> for HistoryForm {
    fn from(calls: CallFormat) -> HistoryForm {
        HistoryForm::Text(calls)
    }
}

/// A conversation's turns as they are added, earlier calls and results
/// in the template's form.
pub struct History {
    form: HistoryForm,
    messages: Vec<Message>,
    /// The last assistant message's calls, each whether it was answered.
    calls: Vec<(EarlierCall, bool)>,
    /// Whether the last turn added is results.
    after_result: bool,
}

impl History {
    /// An empty conversation in `form` (a [`CallFormat`] alone is its
    /// text form).
    pub fn new(form: impl Into<HistoryForm>) -> History {
        History { form: form.into(), messages: Vec::new(), calls: Vec::new(), after_result: false }
    }

    /// Adds a message (its fields kept where the template reads them).
    pub fn push(&mut self, mut message: Message) {
        if !self.form.is_fields() {
            message.fields.clear();
        }
        self.messages.push(message);
        self.calls.clear();
        self.after_result = false;
    }

    /// Adds a message that follows tool results in the same turn of the
    /// client's (Anthropic's tool_result blocks, then text): in the
    /// results' user turn, after them, where results are a user turn.
    pub fn push_after_results(&mut self, message: Message) {
        let joins =
            self.form == HistoryForm::Text(CallFormat::Hermes) || self.form == HistoryForm::Text(CallFormat::Harmony);
        match self.messages.last_mut() {
            Some(last) if joins && self.after_result && last.role == message.role => {
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
        let written = match self.form {
            HistoryForm::Fields(_) | HistoryForm::Gemma4Turn => {
                let calls = earlier_calls(calls)?;
                if let Some(last) = self.messages.last_mut() {
                    let mut list = match last.fields.remove("tool_calls") {
                        Some(Value::Array(list)) => list,
                        _ => Vec::new(),
                    };
                    list.extend(calls.iter().map(|call| {
                        let function = json!({"name": call.name, "arguments": call.arguments});
                        match &call.id {
                            Some(id) => json!({"id": id, "type": "function", "function": function}),
                            None => json!({"type": "function", "function": function}),
                        }
                    }));
                    last.fields.insert("tool_calls".into(), Value::Array(list));
                }
                self.calls.extend(calls.into_iter().map(|call| (call, false)));
                return Ok(());
            }
            HistoryForm::Text(CallFormat::Gemma4) => {
                let calls = earlier_calls(calls)?;
                let written = calls.iter().map(|call| gemma4_call(&call.name, &call.arguments)).collect();
                self.calls.extend(calls.into_iter().map(|call| (call, false)));
                written
            }
            HistoryForm::Text(CallFormat::Xml) => {
                let written: Vec<String> = earlier_calls(calls)?
                    .iter()
                    .map(|call| {
                        format!("{TOOL_CALL_OPEN}\n{}\n{TOOL_CALL_CLOSE}", xml_call(&call.name, &call.arguments))
                    })
                    .collect();
                written.join("\n")
            }
            HistoryForm::Text(CallFormat::Hermes | CallFormat::Harmony) => written_calls(calls)?,
        };
        if let Some(last) = self.messages.last_mut() {
            let joiner =
                if last.content.is_empty() || self.form == HistoryForm::Text(CallFormat::Gemma4) { "" } else { "\n" };
            last.content = format!("{}{joiner}{written}", last.content);
        }
        Ok(())
    }

    /// Adds a tool's result `content`, answering the call `call_id` (or
    /// the next one not answered).
    pub fn push_result(&mut self, content: &str, call_id: Option<&str>) {
        let last_is_the_model = self.messages.last().is_some_and(|m| m.role == "assistant");
        match self.form {
            HistoryForm::Fields(_) | HistoryForm::Gemma4Turn => {
                let (name, id) = self.answered(call_id);
                let mut result = Message::new("tool", content).with_field("name", Value::from(name));
                if let Some(id) = id.or_else(|| call_id.map(str::to_string)) {
                    result = result.with_field("tool_call_id", Value::from(id));
                }
                self.messages.push(result);
                self.after_result = true;
            }
            HistoryForm::Text(CallFormat::Gemma4) if last_is_the_model => {
                let (name, _) = self.answered(call_id);
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
            HistoryForm::Text(_) => {
                let result = written_result(content);
                match self.messages.last_mut() {
                    Some(last) if self.after_result => last.content = format!("{}\n{result}", last.content),
                    _ => self.messages.push(Message::user(result)),
                }
                self.after_result = true;
            }
        }
    }

    /// The name and id of the call a result answers: the one with
    /// `call_id`, else the first one not answered (else `call_id` itself
    /// as the name, or `unknown`).
    fn answered(&mut self, call_id: Option<&str>) -> (String, Option<String>) {
        let by_id = call_id.and_then(|id| self.calls.iter().position(|(c, _)| c.id.as_deref() == Some(id)));
        match by_id.or_else(|| self.calls.iter().position(|(_, answered)| !answered)) {
            Some(i) => {
                self.calls[i].1 = true;
                (self.calls[i].0.name.clone(), self.calls[i].0.id.clone())
            }
            None => (call_id.unwrap_or("unknown").to_string(), None),
        }
    }

    /// The conversation.
    pub fn messages(self) -> Vec<Message> {
        match self.form {
            HistoryForm::Text(_) => self.messages,
            HistoryForm::Fields(calls) => self.messages.into_iter().map(|m| with_thinking(m, calls)).collect(),
            HistoryForm::Gemma4Turn => {
                gemma4_turns(self.messages.into_iter().map(|m| with_thinking(m, CallFormat::Gemma4)).collect())
            }
        }
    }
}

/// An assistant message's `reasoning_content` passed as `thinking` too
/// (harmony's template reads that); for harmony, a message with calls and
/// reasoning has its text left out (module docs).
fn with_thinking(mut message: Message, calls: CallFormat) -> Message {
    if let Some(reasoning) = message.fields.get("reasoning_content").cloned() {
        if calls == CallFormat::Harmony && message.fields.contains_key("tool_calls") {
            message.content.clear();
        }
        message.fields.insert("thinking".into(), reasoning);
    }
    message
}

/// Each model turn of `messages` as Gemma 4's template reads it: an
/// assistant message with calls, the `tool` messages after it (as its
/// `tool_responses`) and the assistant's answer after them (its text,
/// when it calls nothing) one message, as llama.cpp passes them. The
/// text before the calls has no place in the turn and is left out, as
/// llama.cpp does.
fn gemma4_turns(messages: Vec<Message>) -> Vec<Message> {
    let mut turns: Vec<Message> = Vec::with_capacity(messages.len());
    let mut rest = messages.into_iter().peekable();
    while let Some(mut message) = rest.next() {
        let calls = message.fields.get("tool_calls").and_then(Value::as_array).is_some_and(|c| !c.is_empty());
        if message.role != "assistant" || !calls {
            turns.push(message);
            continue;
        }
        message.content.clear();
        let mut responses = Vec::new();
        while let Some(result) = rest.next_if(|m| m.role == "tool") {
            let response = serde_json::from_str::<Value>(&result.content).unwrap_or(Value::from(result.content));
            let name = result.fields.get("name").cloned().unwrap_or(Value::from("unknown"));
            responses.push(json!({"name": name, "response": response}));
        }
        if !responses.is_empty() {
            message.fields.insert("tool_responses".into(), Value::Array(responses));
            let answers =
                |m: &Message| m.role == "assistant" && !m.content.is_empty() && !m.fields.contains_key("tool_calls");
            if let Some(answer) = rest.next_if(answers) {
                message.content = answer.content;
            }
        }
        turns.push(message);
    }
    turns
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conversation(format: impl Into<HistoryForm>) -> Vec<Message> {
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

    #[test]
    fn fields_pass_the_calls_on_the_assistant_message_and_each_result_as_a_named_tool_message() {
        let messages = conversation(HistoryForm::Fields(CallFormat::Hermes));
        let roles: Vec<&str> = messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["user", "assistant", "tool", "tool"]);
        assert_eq!(messages[1].content, "", "the calls are not written into the text");
        assert_eq!(
            messages[1].fields["tool_calls"],
            json!([{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}},
                {"id": "c2", "type": "function", "function": {"name": "get_time", "arguments": {"zone": "UTC"}}}])
        );
        // The first result names its call by id; the second, without one,
        // the first call not answered, and takes its id.
        let named = |m: &Message| (m.content.clone(), m.fields["name"].clone(), m.fields["tool_call_id"].clone());
        assert_eq!(named(&messages[2]), ("12:00".to_string(), json!("get_time"), json!("c2")));
        assert_eq!(named(&messages[3]), ("{\"temp\": 3}".to_string(), json!("get_weather"), json!("c1")));
    }

    #[test]
    fn a_text_form_drops_the_fields_its_template_does_not_read() {
        let mut history = History::new(CallFormat::Hermes);
        history.push(Message::assistant("Hi").with_field("reasoning_content", json!("greet")));
        assert!(history.messages()[0].fields.is_empty());
    }

    #[test]
    fn reasoning_is_passed_as_thinking_too_and_harmony_leaves_out_the_text_beside_a_call() {
        let calls = json!([{"id": "c1", "function": {"name": "f", "arguments": "{}"}}]);
        for (form, text) in [(CallFormat::Harmony, ""), (CallFormat::Hermes, "Let me look.")] {
            let mut history = History::new(HistoryForm::Fields(form));
            history.push(Message::user("Q"));
            history.push(Message::assistant("Let me look.").with_field("reasoning_content", json!("Needs f.")));
            history.push_calls(&calls).expect("calls");
            history.push(Message::assistant("Done.").with_field("reasoning_content", json!("Easy.")));
            let messages = history.messages();
            assert_eq!(messages[1].fields["thinking"], json!("Needs f."), "{form:?}");
            assert_eq!(messages[1].content, text, "{form:?}");
            assert_eq!((messages[2].content.as_str(), &messages[2].fields["thinking"]), ("Done.", &json!("Easy.")));
        }
    }

    /// As llama.cpp passes Gemma 4's template: the calls, the results
    /// (read as JSON where they are) and the answer after them are one
    /// model turn; a later call opens a turn of its own.
    #[test]
    fn a_gemma4_turn_holds_its_calls_their_results_and_the_answer_after_them() {
        let mut history = History::new(HistoryForm::Gemma4Turn);
        history.push(Message::user("Weather and time?"));
        let calls = json!([{"id": "c1", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}},
            {"id": "c2", "function": {"name": "get_time", "arguments": {"zone": "UTC"}}}]);
        history.push_calls(&calls).expect("calls");
        history.push_result("12:00", Some("c2"));
        history.push_result("{\"temp\": 3}", None);
        history.push(Message::assistant("3 degrees at noon."));
        history.push(Message::user("And Lima?"));
        history
            .push_calls(&json!([{"function": {"name": "get_weather", "arguments": {"city": "Lima"}}}]))
            .expect("calls");
        let messages = history.messages();
        let roles: Vec<&str> = messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
        assert_eq!(messages[1].content, "3 degrees at noon.");
        assert_eq!(
            messages[1].fields["tool_responses"],
            json!([{"name": "get_time", "response": "12:00"}, {"name": "get_weather", "response": {"temp": 3}}])
        );
        assert_eq!(messages[1].fields["tool_calls"].as_array().map(Vec::len), Some(2));
        assert!(!messages[3].fields.contains_key("tool_responses"), "{messages:?}");
    }

    #[test]
    fn a_template_of_the_models_own_that_reads_tool_calls_takes_fields() {
        let template = |source: &str| ChatTemplate::new(source, "", "").expect("compiles");
        let reads = "{% for m in messages %}{{ m.content }}{{ m.tool_calls }}{% endfor %}<|start|><|channel|>";
        assert_eq!(HistoryForm::of_template(&template(reads)), HistoryForm::Fields(CallFormat::Harmony));
        let gemma4 = "{% for m in messages %}<|turn>{{ m.tool_calls }}{{ m.tool_responses }}{% endfor %}";
        assert_eq!(HistoryForm::of_template(&template(gemma4)), HistoryForm::Gemma4Turn);
        let plain = "{% for m in messages %}<|turn>{{ m.content }}{% endfor %}";
        assert_eq!(HistoryForm::of_template(&template(plain)), HistoryForm::Text(CallFormat::Gemma4));
        let chatml = ChatTemplate::chatml("", "").expect("chatml");
        assert_eq!(HistoryForm::of_template(&chatml), HistoryForm::Text(CallFormat::Hermes));
    }
}
