//! A chat request's prompt: its messages as the model's chat template takes
//! them (earlier calls and results in the template's form, [`History`]),
//! the tools it may call declared by the template or described in the
//! system message, rendered, tokenized, and a required call's opening
//! after it ([`Prompter`]). One writer for the server's chat completions,
//! Responses and Messages, `/apply-template`, and the Python package's
//! `create_chat_completion`, so that a model is prompted the same way
//! whichever door a conversation comes in by.

use std::sync::Arc;

use baton_gen::{ChatTemplate, Message};
use baton_model::{EncodeOptions, Tokenizer};
use serde_json::Value;

use super::error::ApiError;
use super::history::{History, HistoryForm};
use super::tools::{self, ToolMode, ToolPlan, TOOL_CALL_OPEN};
use super::types::{ChatMessage, ChatRequest, Content};
use crate::engine::{Engine, Grammars};

/// Gemma 4's turn close, and the model turn its generation prompt opens.
const GEMMA4_TURN_CLOSE: &str = "<turn|>\n";
const GEMMA4_MODEL_TURN: &str = "<|turn>model\n";

/// How a rendered conversation ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// With the template's generation prompt: the assistant's turn opened.
    GenerationPrompt,
    /// With the last message, closed.
    Closed,
    /// Inside the last message (the assistant's), which the answer goes on.
    Continued,
}

impl Ending {
    /// A chat completions request's: `continue_final_message`, else a
    /// last assistant message (without tool calls) is continued as
    /// llama-server continues it; `add_generation_prompt: false` closes
    /// the last message. Continuing with the generation prompt asked
    /// for, or a message that is not the assistant's, is refused, and so
    /// are two assistant messages at the end when the last is continued.
    pub fn of(request: &ChatRequest) -> Result<Ending, ApiError> {
        let messages = &request.messages;
        let by_assistant = |m: Option<&ChatMessage>| {
            m.is_some_and(|m| m.role == "assistant" && m.tool_calls.as_ref().is_none_or(Value::is_null))
        };
        let last_is_answer = by_assistant(messages.last());
        let continued = match (request.continue_final_message, request.add_generation_prompt) {
            (Some(true), Some(true)) => {
                let why = "continue_final_message and add_generation_prompt cannot both be true";
                return Err(ApiError::invalid_param("continue_final_message", why));
            }
            (Some(true), _) if !last_is_answer => {
                let why = "continue_final_message needs the last message to be the assistant's (without tool_calls)";
                return Err(ApiError::invalid_param("continue_final_message", why));
            }
            (Some(continued), _) => continued,
            (None, add) => last_is_answer && add != Some(true),
        };
        if continued && messages.len() >= 2 && messages[messages.len() - 2].role == "assistant" {
            let why = "two assistant messages at the end: only the last one can be continued";
            return Err(ApiError::invalid_param("messages", why));
        }
        Ok(match (continued, request.add_generation_prompt) {
            (true, _) => Ending::Continued,
            (false, Some(false)) => Ending::Closed,
            (false, _) => Ending::GenerationPrompt,
        })
    }
}

/// The variables a chat completions request gives its template: its
/// `chat_template_kwargs` (an object), and its `reasoning_effort` as
/// `reasoning_effort` where they do not set it.
pub fn template_variables(request: &ChatRequest) -> Result<serde_json::Map<String, Value>, ApiError> {
    let mut variables = match &request.chat_template_kwargs {
        None | Some(Value::Null) => serde_json::Map::new(),
        Some(Value::Object(map)) => map.clone(),
        Some(other) => {
            let why = format!("{other}: an object of the template's variables, e.g. {{\"enable_thinking\": false}}");
            return Err(ApiError::invalid_param("chat_template_kwargs", why));
        }
    };
    match &request.reasoning_effort {
        None | Some(Value::Null) => {}
        Some(effort @ Value::String(_)) => {
            variables.entry("reasoning_effort").or_insert_with(|| effort.clone());
        }
        Some(other) => return Err(ApiError::invalid_param("reasoning_effort", format!("{other}: a string"))),
    }
    Ok(variables)
}

/// A conversation as the template is given it ([`Prompter::input`]).
pub struct PromptInput {
    /// The messages, the tools described in the system message unless
    /// `declared`.
    pub messages: Vec<Message>,
    /// The tools as the template's `tools`, when it declares them.
    pub declared: Option<Value>,
    /// The tools that may be called, if any.
    pub plan: Option<ToolPlan>,
}

/// A conversation rendered and tokenized ([`Prompter::prompt`]).
pub struct ChatPrompt {
    /// The prompt's tokens.
    pub tokens: Vec<u32>,
    /// The tools that may be called, if any.
    pub plan: Option<ToolPlan>,
}

/// What renders a conversation for one model: its chat template, its
/// tokenizer, and the vocabulary the tools' grammars compile against.
/// Clones share them.
#[derive(Clone)]
pub struct Prompter {
    template: Arc<ChatTemplate>,
    tokenizer: Arc<Tokenizer>,
    grammars: Grammars,
    /// How earlier calls reach the template (read from it once).
    form: HistoryForm,
}

impl Prompter {
    /// The prompter of `engine`'s model with `template`.
    pub fn new(template: Arc<ChatTemplate>, engine: &Engine) -> Prompter {
        let grammars = engine.info().grammars.clone();
        let form = HistoryForm::of_template(&template);
        Prompter { template, tokenizer: engine.tokenizer().clone(), grammars, form }
    }

    /// The chat template.
    pub fn template(&self) -> &Arc<ChatTemplate> {
        &self.template
    }

    /// The format the model calls tools in (its chat template's).
    pub fn call_format(&self) -> tools::CallFormat {
        self.history_form().calls()
    }

    /// How earlier calls and their results reach the chat template.
    pub fn history_form(&self) -> HistoryForm {
        self.form
    }

    /// The tools as the template is given them (chat completions'
    /// `tools`, the ones `plan` may call), when it declares them itself:
    /// a template of the model's own that is passed calls as fields and
    /// reads `tools`, and writes calls in the format decoding holds them
    /// to (harmony's and Gemma 4's are; a Hermes one writes `<tool_call>`).
    /// Else `None`: the tools are described in the system message.
    fn declared_tools(&self, plan: &ToolPlan) -> Option<Value> {
        let own_format = plan.calls != tools::CallFormat::Hermes || self.template.mentions(TOOL_CALL_OPEN);
        (self.history_form().is_fields() && own_format && self.template.reads_tools()).then(|| plan.declared.clone())
    }

    /// The conversation as the template is given it: the tools, when some
    /// may be called, declared through the template's `tools` (see
    /// [`declared_tools`](Self::declared_tools)) or described in its system
    /// message; and the tools' plan (its grammar compiled: CPU work whose
    /// cost the client sets, so the server calls this off its HTTP
    /// threads). `tools` and `choice` are in chat completions' shapes
    /// (several calls in one answer when `parallel`); `response_format` is
    /// refused beside tools.
    pub fn input(
        &self,
        mut messages: Vec<Message>,
        (tools, choice, parallel): (Option<Value>, Option<Value>, bool),
        response_format: Option<&Value>,
    ) -> Result<PromptInput, ApiError> {
        let plan = tools::plan(tools.as_ref(), choice.as_ref(), parallel, self.call_format())?
            .map(|plan| tools::compiled(plan, &self.grammars))
            .transpose()?;
        if plan.is_some() && response_format.is_some_and(|f| f.get("type").and_then(Value::as_str) != Some("text")) {
            return Err(ApiError::invalid_param(
                "response_format",
                "a response_format besides text cannot hold an answer that may call a tool (tool_choice: \"none\" leaves the tools out)",
            ));
        }
        let declared = plan.as_ref().and_then(|plan| self.declared_tools(plan));
        if let (Some(plan), None) = (&plan, &declared) {
            messages = tools::with_tools(messages, plan);
        }
        Ok(PromptInput { messages, declared, plan })
    }

    /// The prompt of a conversation (the messages as the template takes
    /// them, with the tools: [`input`](Self::input)), rendered with the
    /// model's chat template given `variables`, ending as `ending` says
    /// (the generation prompt, the last message closed, or continued), and
    /// tokenized as `baton run --chat` does; with a call required, the
    /// call's opening after it. CPU work: the server calls it off its HTTP
    /// threads.
    pub fn prompt(
        &self,
        messages: Vec<Message>,
        tools: (Option<Value>, Option<Value>, bool),
        response_format: Option<&Value>,
        ending: Ending,
        variables: &serde_json::Map<String, Value>,
    ) -> Result<ChatPrompt, ApiError> {
        let PromptInput { messages, declared, plan } = self.input(messages, tools, response_format)?;
        let with_variables;
        let template = match variables.is_empty() {
            true => &*self.template,
            false => {
                with_variables = self.template.with_variables(variables);
                &with_variables
            }
        };
        let tokenizer = &self.tokenizer;
        // As baton_gen::Conversation::tokens: the template's special tokens
        // parsed, the messages' content as literal text, BOS in front when the
        // model adds one and the template did not write it.
        let encoded = match ending {
            Ending::Continued => template.encode_continued(&messages, declared.as_ref(), tokenizer),
            _ => {
                template.encode_with_tools(&messages, declared.as_ref(), ending == Ending::GenerationPrompt, tokenizer)
            }
        };
        let mut tokens = encoded.map_err(|e| ApiError::invalid_param("messages", e.to_string()))?;
        if ending == Ending::GenerationPrompt && self.history_form() == HistoryForm::Gemma4Turn {
            self.open_gemma4_turn(&mut tokens)?;
        }
        if let Some(plan) = plan.as_ref().filter(|p| p.mode == ToolMode::Required) {
            // The answer opens the call as the tools' instructions show.
            let (opening, parse_special) = plan.opening();
            tokens.extend(self.encode(&opening, parse_special)?);
        }
        Ok(ChatPrompt { tokens, plan })
    }

    /// Gemma 4's template adds no generation prompt after a turn that
    /// held tool results (the model goes on in it), but it closes that
    /// turn when an answer follows the results; a prompt that then ends
    /// in the closed turn gets a model turn opened, as llama.cpp opens one
    /// where a template left none.
    fn open_gemma4_turn(&self, tokens: &mut Vec<u32>) -> Result<(), ApiError> {
        let close = self.encode(GEMMA4_TURN_CLOSE, true)?;
        if !close.is_empty() && tokens.ends_with(&close) {
            tokens.extend(self.encode(GEMMA4_MODEL_TURN, true)?);
        }
        Ok(())
    }

    /// The text of a conversation as the template gives it (the messages
    /// and `declared` tools of [`input`](Self::input), `variables` given
    /// to the template) with the generation prompt, as
    /// [`prompt`](Self::prompt) renders it before tokenizing (a required
    /// call's opening not written): llama-server's `/apply-template`.
    pub fn render(&self, input: &PromptInput, variables: &serde_json::Map<String, Value>) -> Result<String, ApiError> {
        let template = self.template.with_variables(variables);
        let mut text = template
            .render_with_tools(&input.messages, input.declared.as_ref(), true)
            .map_err(|e| ApiError::invalid_param("messages", e.to_string()))?;
        if self.history_form() == HistoryForm::Gemma4Turn && text.ends_with(GEMMA4_TURN_CLOSE) {
            text.push_str(GEMMA4_MODEL_TURN);
        }
        Ok(text)
    }

    /// `text` as tokens, no BOS, special tokens parsed when `parse_special`.
    fn encode(&self, text: &str, parse_special: bool) -> Result<Vec<u32>, ApiError> {
        let options = EncodeOptions { add_special: false, parse_special };
        self.tokenizer.encode(text, options).map_err(|e| ApiError::server(e.to_string()))
    }

    /// [`prompt`](Self::prompt) of a chat completions request: its
    /// messages, tools, `response_format`, ending and template variables.
    pub fn of_request(&self, request: &ChatRequest) -> Result<ChatPrompt, ApiError> {
        if request.messages.is_empty() {
            return Err(ApiError::invalid_param("messages", "messages is empty"));
        }
        let ending = Ending::of(request)?;
        let variables = template_variables(request)?;
        let messages = conversation(&request.messages, self.history_form())?;
        let parallel = tools::parallel(request.parallel_tool_calls.as_ref())?;
        let tools = (request.tools.clone(), request.tool_choice.clone(), parallel);
        self.prompt(messages, tools, request.params.response_format.as_ref(), ending, &variables)
    }
}

/// The request's messages as the template takes them, earlier tool calls
/// and their results in `form`, the template's (see [`History`]); an
/// assistant message's `reasoning_content` passed where the template
/// reads fields.
pub fn conversation(messages: &[ChatMessage], form: HistoryForm) -> Result<Vec<Message>, ApiError> {
    let mut history = History::new(form);
    for m in messages {
        let mut next = message(m)?;
        let calls = m.tool_calls.as_ref().filter(|c| !c.is_null());
        if calls.is_some() && m.role != "assistant" {
            return Err(ApiError::invalid_param("messages", "only assistant messages carry tool_calls"));
        }
        if m.role == "tool" {
            history.push_result(&next.content, m.tool_call_id.as_ref().and_then(Value::as_str));
            continue;
        }
        match m.reasoning_content.as_ref().filter(|r| !r.is_null()) {
            Some(Value::String(reasoning)) if m.role == "assistant" => {
                next = next.with_field("reasoning_content", Value::from(reasoning.as_str()));
            }
            Some(_) => {
                return Err(ApiError::invalid_param("messages", "reasoning_content is an assistant message's text"))
            }
            None => {}
        }
        history.push(next);
        if let Some(calls) = calls {
            history.push_calls(calls)?;
        }
    }
    Ok(history.messages())
}

fn message(m: &ChatMessage) -> Result<Message, ApiError> {
    let content = match &m.content {
        None => String::new(),
        Some(Content::Text(text)) => text.clone(),
        Some(Content::Parts(parts)) => {
            let mut text = String::new();
            for part in parts {
                match (part.kind.as_str(), &part.text) {
                    ("text", Some(t)) => text.push_str(t),
                    (kind, _) => {
                        return Err(ApiError::invalid_param(
                            "messages",
                            format!("content parts of type `{kind}` are not served (only `text` with its text)"),
                        ))
                    }
                }
            }
            text
        }
    };
    Ok(Message::new(m.role.clone(), content))
}
