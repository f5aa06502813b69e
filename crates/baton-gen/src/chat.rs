//! Chat templates: a conversation (role, content messages) rendered to the
//! prompt text an instruct model was trained on.

use std::collections::BTreeMap;

use baton_gguf::{GgufFile, OptionalKey};
use baton_tokenizer::Tokenizer;
use minijinja::syntax::SyntaxConfig;
use minijinja::value::Value;
use minijinja::{Environment, ErrorKind};
use serde_json::{Map as JsonMap, Value as JsonValue};

use crate::chat_values::{json_value, ordered_map};

use baton_model::CHAT_TEMPLATE_KEY as TEMPLATE_KEY;

/// ChatML, the fallback when a file has no template (llama.cpp's default).
pub const CHATML: &str = "{% for message in messages %}\
{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}\
{% endfor %}\
{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// Gemma's turn format (`<start_of_turn>user … <end_of_turn>`, the
/// assistant's role named `model`, a system message put before the first
/// user message): the fallback for files without a template whose
/// vocabulary has Gemma's turn tokens.
pub const GEMMA: &str = "{{ bos_token }}\
{% if messages and messages[0]['role'] == 'system' %}\
{% set system = messages[0]['content'] | trim + '\n\n' %}{% set turns = messages[1:] %}\
{% else %}{% set system = '' %}{% set turns = messages %}{% endif %}\
{% for message in turns %}\
{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}\
{{ '<start_of_turn>' + role + '\n' + (system if loop.first else '') + message['content'] | trim + '<end_of_turn>\n' }}\
{% endfor %}\
{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}";

/// Gemma 4's turn format (`<|turn>user … <turn|>`, the assistant's role
/// named `model`, a system message in a turn of its own): the fallback for
/// files without a template whose vocabulary has Gemma 4's turn tokens.
pub const GEMMA4: &str = "{{ bos_token }}\
{% if messages and messages[0]['role'] == 'system' %}\
{{ '<|turn>system\n' + messages[0]['content'] | trim + '<turn|>\n' }}{% set turns = messages[1:] %}\
{% else %}{% set turns = messages %}{% endif %}\
{% for message in turns %}\
{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}\
{{ '<|turn>' + role + '\n' + message['content'] | trim + '<turn|>\n' }}\
{% endfor %}\
{% if add_generation_prompt %}{{ '<|turn>model\n' }}{% endif %}";

/// The name templates are registered under (it appears in error messages).
const NAME: &str = "chat_template";

/// Marks the errors `raise_exception` raises, to tell them from others.
const RAISED: &str = "raise_exception: ";

/// What went wrong rendering a conversation.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    /// The template's Jinja source does not compile.
    #[error("the chat template ({origin}) does not compile: {detail}")]
    Syntax {
        /// Where the template came from.
        origin: TemplateOrigin,
        /// The engine's message, with the line.
        detail: String,
    },
    /// The template failed while rendering (an unknown filter, a bad
    /// operation on a value…).
    #[error("the chat template ({origin}) failed to render: {detail}")]
    Render {
        /// Where the template came from.
        origin: TemplateOrigin,
        /// The engine's message, with the line.
        detail: String,
    },
    /// The template refused the conversation through `raise_exception`
    /// (roles that do not alternate, a system message it does not take…).
    #[error("the chat template refused the conversation: {0}")]
    Refused(String),
    /// The file's template metadata is unreadable (not a string).
    #[error(transparent)]
    Metadata(#[from] baton_gguf::MetadataError),
    /// A message's role or one of its fields (or its content, where the
    /// template cannot be traced: see [`ChatTemplate::encode`]), or a
    /// tool's declaration, holds a special token's text, which would forge
    /// the conversation's structure.
    #[error(
        "a message's {field} holds a special token's text ({text:?}); special tokens come only from the chat template"
    )]
    SpecialTokenInMessage {
        /// `role`, `content`, a field's name (`tool_calls`…) or `tools`.
        field: &'static str,
        /// The text.
        text: String,
    },
    /// The last message cannot be continued
    /// ([`ChatTemplate::encode_continued`]): why.
    #[error("the last message cannot be continued: {0}")]
    NotContinuable(&'static str),
    /// The rendered conversation could not be tokenized.
    #[error(transparent)]
    Tokenize(#[from] baton_tokenizer::TokenizerError),
}

/// Where a [`ChatTemplate`] came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TemplateOrigin {
    /// The model file's `tokenizer.chat_template`.
    File,
    /// ChatML, because the file has no template.
    ChatMlFallback,
    /// Gemma's turn format, because the file has no template and its
    /// vocabulary has Gemma's turn tokens.
    GemmaFallback,
    /// Gemma 4's turn format, because the file has no template and its
    /// vocabulary has Gemma 4's turn tokens.
    Gemma4Fallback,
    /// A template given by the caller.
    Custom,
}

impl std::fmt::Display for TemplateOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TemplateOrigin::File => "from the model file",
            TemplateOrigin::ChatMlFallback => "ChatML, the fallback",
            TemplateOrigin::GemmaFallback => "Gemma's turn format, the fallback for its vocabulary",
            TemplateOrigin::Gemma4Fallback => "Gemma 4's turn format, the fallback for its vocabulary",
            TemplateOrigin::Custom => "custom",
        })
    }
}

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// `system`, `user`, `assistant` (templates may know others, e.g. `tool`).
    pub role: String,
    /// The text.
    pub content: String,
    /// What a template may read of the message beside its role and
    /// content, in chat completions' shapes: an assistant message's
    /// `tool_calls` (each `{"id", "type": "function", "function": {"name",
    /// "arguments"}}`) and `reasoning_content` (`thinking`), a tool
    /// message's `tool_call_id` and `name`, Gemma 4's `tool_responses`.
    /// Empty for most messages; a key absent here is undefined in the
    /// template (`"tool_calls" in message` is false).
    pub fields: JsonMap<String, JsonValue>,
}

impl Message {
    /// A message of any role.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Message {
        Message { role: role.into(), content: content.into(), fields: JsonMap::new() }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Message {
        Message::new("system", content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Message {
        Message::new("user", content)
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Message {
        Message::new("assistant", content)
    }

    /// The message with the field `key` (see [`Message::fields`]) set to
    /// `value`.
    pub fn with_field(mut self, key: impl Into<String>, value: JsonValue) -> Message {
        self.fields.insert(key.into(), value);
        self
    }

    fn to_value(&self) -> Value {
        let mut members = vec![
            ("role".to_string(), Value::from(self.role.as_str())),
            ("content".to_string(), Value::from(self.content.as_str())),
        ];
        members.extend(self.fields.iter().map(|(key, value)| (key.clone(), json_value(value))));
        ordered_map(members)
    }
}

/// A compiled chat template with the model's BOS and EOS token texts.
///
/// Chat templates: a conversation (role, content messages) rendered to the
/// prompt text an instruct model was trained on.
///
/// The template is the Jinja source in the GGUF key
/// `tokenizer.chat_template`, rendered as Hugging Face transformers does
/// (`trim_blocks` and `lstrip_blocks` on, `raise_exception`, the `loopcontrols`
/// extension, Python string methods such as `.strip()` and `.startswith()`),
/// with the variables `messages` (each its `role`, `content` and the
/// [fields](Message::fields) it has), `add_generation_prompt`, `bos_token`,
/// `eos_token` and, when given, `tools`. A file without a template gets ChatML, llama.cpp's default;
/// [`ChatTemplate::origin`] says which one is in use.
///
/// ```
/// use baton_gen::{ChatTemplate, Message};
///
/// let template = ChatTemplate::chatml("", "<|im_end|>")?;
/// let prompt = template.render(&[Message::user("Hi")], true)?;
/// assert_eq!(prompt, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
/// # Ok::<(), baton_gen::ChatError>(())
/// ```
pub struct ChatTemplate {
    env: std::sync::Arc<Environment<'static>>,
    source: String,
    origin: TemplateOrigin,
    bos_token: String,
    eos_token: String,
    /// Variables every rendering is given besides its own (a request's
    /// `chat_template_kwargs`: `enable_thinking`, `reasoning_effort`…).
    variables: JsonMap<String, JsonValue>,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("origin", &self.origin)
            .field("source", &self.source)
            .field("bos_token", &self.bos_token)
            .field("eos_token", &self.eos_token)
            .finish_non_exhaustive()
    }
}

impl ChatTemplate {
    /// Compiles a template given by the caller.
    pub fn new(
        source: impl Into<String>,
        bos_token: impl Into<String>,
        eos_token: impl Into<String>,
    ) -> Result<ChatTemplate, ChatError> {
        Self::compile(source.into(), TemplateOrigin::Custom, bos_token.into(), eos_token.into())
    }

    /// ChatML (the fallback for files without a template).
    pub fn chatml(bos_token: impl Into<String>, eos_token: impl Into<String>) -> Result<ChatTemplate, ChatError> {
        Self::compile(CHATML.to_string(), TemplateOrigin::ChatMlFallback, bos_token.into(), eos_token.into())
    }

    /// The template of a model: `source` is the file's
    /// `tokenizer.chat_template`; without one, [`GEMMA`] for a vocabulary
    /// with `<start_of_turn>` and `<end_of_turn>`, [`GEMMA4`] for one with
    /// `<|turn>` and `<turn|>`, else ChatML. The BOS and EOS texts come from
    /// the tokenizer.
    pub fn for_tokenizer(source: Option<&str>, tokenizer: &Tokenizer) -> Result<ChatTemplate, ChatError> {
        let text = |id: Option<u32>| id.and_then(|id| tokenizer.token_text(id).ok()).unwrap_or("").to_string();
        let (bos, eos) = (text(tokenizer.bos_id()), text(tokenizer.eos_id()));
        match source {
            Some(source) => Self::compile(source.to_string(), TemplateOrigin::File, bos, eos),
            None if ["<start_of_turn>", "<end_of_turn>"].iter().all(|t| tokenizer.token_id(t).is_some()) => {
                Self::compile(GEMMA.to_string(), TemplateOrigin::GemmaFallback, bos, eos)
            }
            None if ["<|turn>", "<turn|>"].iter().all(|t| tokenizer.token_id(t).is_some()) => {
                Self::compile(GEMMA4.to_string(), TemplateOrigin::Gemma4Fallback, bos, eos)
            }
            None => Self::chatml(bos, eos),
        }
    }

    /// The template of a GGUF file (ChatML when it has none).
    pub fn from_gguf(file: &GgufFile, tokenizer: &Tokenizer) -> Result<ChatTemplate, ChatError> {
        Self::for_tokenizer(template_source(file)?, tokenizer)
    }

    fn compile(
        source: String,
        origin: TemplateOrigin,
        bos_token: String,
        eos_token: String,
    ) -> Result<Self, ChatError> {
        let mut env = Environment::new();
        let syntax = SyntaxConfig::builder().trim_blocks(true).lstrip_blocks(true).build();
        let syntax = syntax.map_err(|e| ChatError::Syntax { origin, detail: e.to_string() })?;
        env.set_syntax(syntax);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_filter("tojson", crate::chat_json::tojson);
        env.add_function("strftime_now", |format: String| crate::chat_time::strftime_now(&format));
        env.add_function("raise_exception", |message: String| -> Result<Value, minijinja::Error> {
            Err(minijinja::Error::new(ErrorKind::InvalidOperation, format!("{RAISED}{message}")))
        });
        env.add_template_owned(NAME, source.clone())
            .map_err(|e| ChatError::Syntax { origin, detail: e.to_string() })?;
        let env = std::sync::Arc::new(env);
        Ok(ChatTemplate { env, source, origin, bos_token, eos_token, variables: JsonMap::new() })
    }

    /// Where the template came from.
    pub fn origin(&self) -> TemplateOrigin {
        self.origin
    }

    /// The Jinja source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Renders `messages`; `add_generation_prompt` appends the opening of
    /// the assistant's turn (what the model continues from).
    pub fn render(&self, messages: &[Message], add_generation_prompt: bool) -> Result<String, ChatError> {
        self.render_with_tools(messages, None, add_generation_prompt)
    }

    /// As [`render`](Self::render), with the template's `tools` variable
    /// (chat completions' `tools`: `[{"type": "function", "function":
    /// {"name", "description", "parameters"}}]`) when `tools` is given;
    /// without, `tools` is undefined.
    pub fn render_with_tools(
        &self,
        messages: &[Message],
        tools: Option<&JsonValue>,
        add_generation_prompt: bool,
    ) -> Result<String, ChatError> {
        let template = self.env.get_template(NAME).map_err(|e| self.render_error(e))?;
        let mut context: BTreeMap<String, Value> = BTreeMap::from([
            ("messages".to_string(), Value::from_iter(messages.iter().map(Message::to_value))),
            ("add_generation_prompt".to_string(), Value::from(add_generation_prompt)),
            ("bos_token".to_string(), Value::from(self.bos_token.as_str())),
            ("eos_token".to_string(), Value::from(self.eos_token.as_str())),
        ]);
        if let Some(tools) = tools {
            context.insert("tools".to_string(), json_value(tools));
        }
        // The template's own variables (messages, tools…) are not replaced.
        for (name, value) in &self.variables {
            context.entry(name.clone()).or_insert_with(|| json_value(value));
        }
        template.render(Value::from(context)).map_err(|e| self.render_error(e))
    }

    /// This template, its renderings given `variables` besides their own
    /// (llama-server's and vLLM's `chat_template_kwargs`, e.g.
    /// `{"enable_thinking": false}` for Qwen 3's templates, or
    /// `reasoning_effort` for gpt-oss's); over the variables it was given
    /// before, and never in place of `messages`, `tools`,
    /// `add_generation_prompt`, `bos_token` or `eos_token`. Cheap: the
    /// compiled template is shared.
    pub fn with_variables(&self, variables: &JsonMap<String, JsonValue>) -> ChatTemplate {
        let mut merged = self.variables.clone();
        merged.extend(variables.iter().map(|(k, v)| (k.clone(), v.clone())));
        ChatTemplate {
            env: self.env.clone(),
            source: self.source.clone(),
            origin: self.origin,
            bos_token: self.bos_token.clone(),
            eos_token: self.eos_token.clone(),
            variables: merged,
        }
    }

    /// Whether the template reads the variable `tools` (declares the tools
    /// itself when given them).
    pub fn reads_tools(&self) -> bool {
        self.env.get_template(NAME).is_ok_and(|t| t.undeclared_variables(false).contains("tools"))
    }

    /// Whether the template's source names `word` (a message field such
    /// as `tool_calls`, which [`Message::fields`] passes it).
    pub fn mentions(&self, word: &str) -> bool {
        self.source.contains(word)
    }

    fn render_error(&self, e: minijinja::Error) -> ChatError {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        while let Some(err) = cause {
            if let Some(detail) = err.downcast_ref::<minijinja::Error>().and_then(minijinja::Error::detail) {
                if let Some(message) = detail.strip_prefix(RAISED) {
                    return ChatError::Refused(message.to_string());
                }
            }
            cause = err.source();
        }
        ChatError::Render { origin: self.origin, detail: e.to_string() }
    }
}

/// The file's `tokenizer.chat_template`, if it has one.
pub fn template_source(file: &GgufFile) -> Result<Option<&str>, ChatError> {
    Ok(file.metadata().get_str(TEMPLATE_KEY).optional()?)
}

/// Texts of the tokens that end a turn in common templates; a template that
/// contains one makes that token a stop token (besides EOS).
const END_OF_TURN_TEXTS: [&str; 8] = [
    "<|im_end|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end|>",
    "<end_of_turn>",
    "<turn|>",
    "<|endoftext|>",
    "<|end_of_text|>",
];

/// The tokens that end the assistant's turn: EOS, and the end-of-turn
/// markers the template writes that the vocabulary has as single tokens
/// (`<|im_end|>` for ChatML and SmolLM2, `<|eot_id|>` for Llama 3,
/// `<turn|>` for Gemma 4…).
pub fn end_of_turn_tokens(template: &ChatTemplate, tokenizer: &Tokenizer) -> Vec<u32> {
    let mut stops: Vec<u32> = tokenizer.eos_id().into_iter().collect();
    for text in END_OF_TURN_TEXTS {
        if template.source.contains(text) {
            if let Some(id) = tokenizer.token_id(text) {
                if !stops.contains(&id) {
                    stops.push(id);
                }
            }
        }
    }
    stops
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conversation() -> Vec<Message> {
        vec![Message::system("Be brief."), Message::user("Hi"), Message::assistant("Hello!"), Message::user("Bye")]
    }

    #[test]
    fn chatml_renders_every_message_and_the_generation_prompt() {
        let template = ChatTemplate::chatml("<s>", "</s>").expect("chatml compiles");
        assert_eq!(template.origin(), TemplateOrigin::ChatMlFallback);
        let expected = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n\
                        <|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n\
                        <|im_start|>assistant\n";
        assert_eq!(template.render(&conversation(), true).expect("render"), expected);
        let without = template.render(&conversation(), false).expect("render");
        assert_eq!(without, expected.trim_end_matches("<|im_start|>assistant\n"));
    }

    #[test]
    fn gemma_turns_put_the_system_message_in_the_first_user_turn() {
        let template =
            ChatTemplate::compile(GEMMA.into(), TemplateOrigin::GemmaFallback, "<bos>".into(), "<eos>".into())
                .expect("compiles");
        let expected = "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n\
                        <start_of_turn>model\nHello!<end_of_turn>\n<start_of_turn>user\nBye<end_of_turn>\n\
                        <start_of_turn>model\n";
        assert_eq!(template.render(&conversation(), true).expect("render"), expected);
        let plain = [Message::user(" Hi ")];
        let rendered = template.render(&plain, false).expect("render");
        assert_eq!(rendered, "<bos><start_of_turn>user\nHi<end_of_turn>\n");
    }

    #[test]
    fn a_file_without_a_template_falls_back_to_chatml() {
        let config = baton_tokenizer::synthetic_bpe(300);
        let tokenizer = Tokenizer::from_config(&config).expect("tokenizer");
        let template = ChatTemplate::for_tokenizer(None, &tokenizer).expect("fallback");
        assert_eq!(template.origin(), TemplateOrigin::ChatMlFallback);
        assert_eq!(template.source(), CHATML);
        let im_end = tokenizer.token_id("<|im_end|>").expect("synthetic vocabularies have <|im_end|>");
        let stops = end_of_turn_tokens(&template, &tokenizer);
        assert!(stops.contains(&im_end), "<|im_end|> ends a ChatML turn: {stops:?}");
        assert_eq!(
            template.render(&[Message::user("Hi")], true).expect("render"),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn a_gemma4_vocabulary_without_a_template_gets_gemma4_turns_that_end_at_turn_close() {
        let tokenizer = Tokenizer::from_config(&baton_tokenizer::synthetic_gemma4(512)).expect("tokenizer");
        let template = ChatTemplate::for_tokenizer(None, &tokenizer).expect("fallback");
        assert_eq!(template.origin(), TemplateOrigin::Gemma4Fallback);
        let rendered = template.render(&conversation(), true).expect("render");
        let expected = "<bos><|turn>system\nBe brief.<turn|>\n<|turn>user\nHi<turn|>\n\
                        <|turn>model\nHello!<turn|>\n<|turn>user\nBye<turn|>\n<|turn>model\n";
        assert_eq!(rendered, expected);
        let close = tokenizer.token_id("<turn|>").expect("<turn|> is a token");
        let stops = end_of_turn_tokens(&template, &tokenizer);
        assert!(stops.contains(&close) && stops.contains(&1), "<turn|> and <eos> end a turn: {stops:?}");
        // The markers are single tokens of the rendered prompt, BOS once.
        let options = baton_tokenizer::EncodeOptions { add_special: false, parse_special: true };
        let ids = tokenizer.encode(&rendered, options).expect("encode");
        let open = tokenizer.token_id("<|turn>").expect("<|turn> is a token");
        assert_eq!(ids.iter().filter(|&&id| id == open).count(), 5);
        assert_eq!(ids.iter().filter(|&&id| id == close).count(), 4);
        assert_eq!(ids.iter().filter(|&&id| Some(id) == tokenizer.bos_id()).count(), 1);
    }

    #[test]
    fn a_broken_template_is_a_syntax_error_with_its_line() {
        let err = ChatTemplate::new("{% for m in messages %}\n{{ m.content }", "", "").expect_err("broken");
        let text = err.to_string();
        assert!(matches!(err, ChatError::Syntax { origin: TemplateOrigin::Custom, .. }), "{err:?}");
        assert!(text.contains("does not compile") && text.contains("chat_template:2"), "message: {text}");
    }

    #[test]
    fn a_failing_template_is_a_render_error_not_a_panic() {
        let template = ChatTemplate::new("{{ messages | no_such_filter }}", "", "").expect("compiles");
        let err = template.render(&[Message::user("Hi")], true).expect_err("unknown filter");
        assert!(matches!(err, ChatError::Render { .. }), "{err:?}");
        assert!(err.to_string().contains("no_such_filter"), "{err}");
    }

    #[test]
    fn raise_exception_refuses_the_conversation_with_its_message() {
        let source =
            "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}";
        let template = ChatTemplate::new(source, "", "").expect("compiles");
        let err = template.render(&conversation(), true).expect_err("refused");
        assert!(matches!(&err, ChatError::Refused(m) if m == "System role not supported"), "{err:?}");
        assert!(template.render(&[Message::user("Hi")], true).is_ok());
    }

    #[test]
    fn python_string_methods_bos_and_hf_whitespace_rules_work() {
        let source = "{{ bos_token }}{% for m in messages %}\n  {% if m.content.startswith('  ') %}{{ m.content.strip() }}{% else %}{{ m['content'] | trim }}{% endif %}{{ eos_token }}\n{% endfor %}";
        let template = ChatTemplate::new(source, "<s>", "</s>").expect("compiles");
        let rendered = template.render(&[Message::user("  a "), Message::user(" b")], false).expect("render");
        // lstrip_blocks removes the indentation before a block tag,
        // trim_blocks the newline after one.
        assert_eq!(rendered, "<s>a</s>\nb</s>\n");
    }

    #[test]
    fn loop_controls_work() {
        let source = "{% for m in messages %}{% if loop.index > 1 %}{% break %}{% endif %}{{ m.content }}{% endfor %}";
        let template = ChatTemplate::new(source, "", "").expect("compiles");
        assert_eq!(template.render(&conversation(), false).expect("render"), "Be brief.");
    }

    /// A message's fields reach the template as chat completions has them
    /// (a mapping's keys in their order; a key not set is not `in` the
    /// message), and so do the tools, which the template is seen to read.
    /// Llama 3's and gpt-oss's templates write today's date.
    #[test]
    fn templates_may_write_the_date_with_strftime_now() {
        let template = ChatTemplate::new("Today: {{ strftime_now('%d %b %Y') }}", "", "").expect("compiles");
        let text = template.render(&[], false).expect("renders");
        let date = text.strip_prefix("Today: ").expect("prefix");
        assert_eq!((date.len(), date.as_bytes()[2], date.as_bytes()[6]), (11, b' ', b' '), "{text}");
    }

    /// `chat_template_kwargs`: a variable the template reads changes the
    /// rendering; the rendering's own variables are never replaced.
    #[test]
    fn variables_reach_the_template_beside_its_own_and_never_replace_them() {
        let source = "{% for m in messages %}{{ m.content }};{% endfor %}\
            {% if add_generation_prompt %}<a>{% if enable_thinking is defined and not enable_thinking %}\
            <think></think>{% endif %}{% endif %}{{ effort | default('-') }}";
        let template = ChatTemplate::new(source, "", "").expect("compiles");
        let messages = [Message::user("hi")];
        assert_eq!(template.render(&messages, true).expect("render"), "hi;<a>-");
        let vars = |v: serde_json::Value| v.as_object().cloned().expect("an object");
        let off = template.with_variables(&vars(serde_json::json!({"enable_thinking": false, "effort": "low"})));
        assert_eq!(off.render(&messages, true).expect("render"), "hi;<a><think></think>low");
        // Later variables go over earlier ones; the template's own stay.
        let high = off.with_variables(&vars(
            serde_json::json!({"effort": "high", "messages": [], "add_generation_prompt": false}),
        ));
        assert_eq!(high.render(&messages, true).expect("render"), "hi;<a><think></think>high");
        assert_eq!(template.render(&messages, true).expect("render"), "hi;<a>-", "the original is unchanged");
    }

    #[test]
    fn fields_and_tools_reach_the_template_in_their_order() {
        let source = "{% for m in messages %}{{ m.role }}:{{ 'tool_calls' in m }}\
            {% for c in m.tool_calls or [] %}|{{ c.function.name }}\
            {% for k, v in c.function.arguments.items() %} {{ k }}={{ v }}{% endfor %}\
            |{{ c.function.arguments | tojson }}{% endfor %};{% endfor %}{{ tools | length if tools else 'none' }}";
        let template = ChatTemplate::new(source, "", "").expect("compiles");
        assert!(template.reads_tools() && template.mentions("tool_calls"));
        assert!(!ChatTemplate::chatml("", "").expect("chatml").reads_tools());
        let call = serde_json::json!([{"id": "c1", "type": "function",
            "function": {"name": "f", "arguments": {"zone": "UTC", "city": "Oslo", "days": 2}}}]);
        let messages = [Message::user("Hi"), Message::assistant("").with_field("tool_calls", call)];
        let tools = serde_json::json!([{"type": "function", "function": {"name": "f"}}]);
        let rendered = template.render_with_tools(&messages, Some(&tools), false).expect("render");
        assert_eq!(
            rendered,
            "user:False;assistant:True|f zone=UTC city=Oslo days=2|{\"zone\": \"UTC\", \"city\": \"Oslo\", \"days\": 2};1"
        );
        assert!(template.render(&messages, false).expect("render").ends_with(";none"), "tools undefined without");
    }
}
