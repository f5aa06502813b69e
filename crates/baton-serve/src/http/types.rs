//! The OpenAI request bodies (the fields Baton reads) and the models
//! list's entry; the answers' shapes are baton-gen's (`openai`), shared
//! with the Python package. Unknown request fields are ignored, as OpenAI
//! clients send extras; a known field of the wrong type is a 400.

use serde::{Deserialize, Serialize};

/// `stop`: one string or several.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Stop {
    /// One stop string.
    One(String),
    /// Several.
    Many(Vec<String>),
}

/// `stream_options`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct StreamOptions {
    /// Send a last chunk with the `usage` counts before `[DONE]`.
    #[serde(default, deserialize_with = "null_is_false")]
    pub include_usage: bool,
}

/// A boolean field that may also be `null` (as every optional field of
/// OpenAI's API may), which means `false`.
pub fn null_is_false<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    Ok(Option::<bool>::deserialize(deserializer)?.unwrap_or(false))
}

/// The generation parameters both endpoints share.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Params {
    /// The model's name; absent or the served model's name.
    pub model: Option<String>,
    /// Most tokens to generate.
    pub max_tokens: Option<u64>,
    /// The newer name of `max_tokens` (chat); wins when both are given.
    pub max_completion_tokens: Option<u64>,
    /// Sampling temperature (0 = greedy).
    pub temperature: Option<f32>,
    /// Nucleus filter.
    pub top_p: Option<f32>,
    /// Keep the `top_k` most likely tokens (0 = off).
    pub top_k: Option<u64>,
    /// Min-p filter.
    pub min_p: Option<f32>,
    /// Seed of the draw; absent = a fresh one per request.
    pub seed: Option<u64>,
    /// Stop strings.
    pub stop: Option<Stop>,
    /// OpenAI's presence penalty, in `[-2, 2]`.
    pub presence_penalty: Option<f32>,
    /// OpenAI's frequency penalty, in `[-2, 2]`.
    pub frequency_penalty: Option<f32>,
    /// llama.cpp's repetition penalty (1 = off).
    #[serde(alias = "repeat_penalty")]
    pub repetition_penalty: Option<f32>,
    /// Tokens the repetition penalty looks back over (`-1`: the context;
    /// more than the context is the context, as llama.cpp).
    pub repeat_last_n: Option<i64>,
    /// Choices to generate, each its own sequence (1 to 16).
    pub n: Option<u64>,
    /// Log-probabilities of the generated tokens: `true`/`false` (chat), or
    /// the number of alternatives (completions; 0 = the drawn token only).
    pub logprobs: Option<serde_json::Value>,
    /// Alternatives per token with `logprobs: true` (0 to 20).
    pub top_logprobs: Option<u64>,
    /// llama.cpp's `ignore_eos`: generate through end-of-generation tokens
    /// (until `max_tokens` or the context is full); `null` is `false`.
    #[serde(default, deserialize_with = "null_is_false")]
    pub ignore_eos: bool,
    /// Stream server-sent events; `null` is `false` (OpenAI documents
    /// `boolean or null`).
    #[serde(default, deserialize_with = "null_is_false")]
    pub stream: bool,
    /// Options of the stream.
    pub stream_options: Option<StreamOptions>,
    /// `{"type": "text"}` (the default), `{"type": "json_object"}` or
    /// `{"type": "json_schema", …}`.
    pub response_format: Option<serde_json::Value>,
    /// llama-server's `grammar`: a GBNF grammar the answer is held to
    /// (instead of a `response_format`).
    pub grammar: Option<String>,
    /// llama-server's `json_schema`: a JSON Schema the answer is held to,
    /// as `response_format`'s `json_schema` (instead of one).
    pub json_schema: Option<serde_json::Value>,
    /// Biases added to tokens' logits before sampling: OpenAI's object of
    /// token ids (as strings) to numbers in `[-100, 100]`, or
    /// llama-server's list of `[id, bias]` pairs; `false` bans a token
    /// (read as any JSON value so that a wrong one gets a 400 that names
    /// it).
    pub logit_bias: Option<serde_json::Value>,
    /// vLLM's `cache_salt`: requests with different salts never share
    /// cached prompt prefixes (a non-empty string; read as any JSON value
    /// so that a wrong one gets a 400 that names it).
    pub cache_salt: Option<serde_json::Value>,
    /// llama-server's `speculative.n_max`: the most drafted tokens a step
    /// verifies (0: no drafts), drafted as `speculative.type` says; absent:
    /// as the server's `--spec-type` says. The tokens are the same either
    /// way.
    #[serde(rename = "speculative.n_max")]
    pub speculative_n_max: Option<u64>,
    /// How drafts are made (Baton's): `none`, `ngram` (n-grams of the
    /// text) or `mtp` (the model's own prediction head, on a server started
    /// with `--spec-type mtp`); absent: as the server's `--spec-type` says,
    /// n-grams when it drafts by none and `speculative.n_max` asks for
    /// drafts.
    #[serde(rename = "speculative.type")]
    pub speculative_type: Option<String>,
    /// llama-server's `speculative.n_min`: the fewest drafted tokens worth
    /// a verification.
    #[serde(rename = "speculative.n_min")]
    pub speculative_n_min: Option<u64>,
    /// llama-server's `timings_per_token`: a stream's chunks carry the
    /// `timings` so far.
    #[serde(default, deserialize_with = "null_is_false")]
    pub timings_per_token: bool,
    /// llama-server's `return_progress`: a stream tells how far reading
    /// the prompt got (`prompt_progress` chunks).
    #[serde(default, deserialize_with = "null_is_false")]
    pub return_progress: bool,
    /// llama-server's `verbose`: a whole answer carries `__verbose`, the
    /// prompt as text and the answer's.
    #[serde(default, deserialize_with = "null_is_false")]
    pub verbose: bool,
}

/// The fields the Anthropic Messages and Responses requests take under
/// chat completions' names.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct CommonParams {
    /// The model's name (any is served, as on chat completions).
    pub model: Option<String>,
    /// Sampling temperature (0 = greedy).
    pub temperature: Option<f32>,
    /// Nucleus filter.
    pub top_p: Option<f32>,
    /// Seed of the draw (not those APIs' own: llama-server's, for answers
    /// that repeat); absent = a fresh one per request.
    pub seed: Option<u64>,
    /// Stream the answer as the API's events; `null` is `false`.
    #[serde(default, deserialize_with = "null_is_false")]
    pub stream: bool,
}

impl CommonParams {
    /// Chat completions' parameters with these set.
    pub fn params(&self) -> Params {
        Params {
            model: self.model.clone(),
            temperature: self.temperature,
            top_p: self.top_p,
            seed: self.seed,
            stream: self.stream,
            ..Params::default()
        }
    }
}

/// A chat message's content: text, or a list of parts of which only text
/// parts are served.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Content parts.
    Parts(Vec<Part>),
}

/// One content part.
#[derive(Debug, Clone, Deserialize)]
pub struct Part {
    /// `text` (others are refused).
    #[serde(rename = "type")]
    pub kind: String,
    /// The text of a text part.
    pub text: Option<String>,
}

/// One message of a conversation.
#[derive(Debug, Clone, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant`…
    pub role: String,
    /// What it says (`null` = empty).
    pub content: Option<Content>,
    /// An assistant message's calls of tools (`tool_calls`).
    #[serde(default)]
    pub tool_calls: Option<serde_json::Value>,
    /// A tool message's call that it answers (`tool_call_id`).
    #[serde(default)]
    pub tool_call_id: Option<serde_json::Value>,
    /// An assistant message's reasoning (`reasoning_content`, as
    /// llama-server and vLLM return it).
    #[serde(default)]
    pub reasoning_content: Option<serde_json::Value>,
}

/// `POST /v1/chat/completions`.
#[derive(Debug, Clone, Deserialize)]
pub struct ChatRequest {
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// Functions the model may call (see [`super::tools`]).
    #[serde(default)]
    pub tools: Option<serde_json::Value>,
    /// `none`, `auto`, `required` or a named function.
    #[serde(default)]
    pub tool_choice: Option<serde_json::Value>,
    /// Several calls in one answer (`true`, OpenAI's default) or one
    /// (read as any JSON value so that a wrong one gets a 400 that names
    /// it).
    #[serde(default)]
    pub parallel_tool_calls: Option<serde_json::Value>,
    /// Whether the prompt ends with the template's generation prompt (the
    /// assistant's turn opened); `false` ends it with the last message.
    #[serde(default)]
    pub add_generation_prompt: Option<bool>,
    /// vLLM's and llama-server's `continue_final_message`: the last
    /// message (the assistant's) is continued, not closed. Absent, a last
    /// assistant message is continued (llama-server's assistant prefill).
    #[serde(default)]
    pub continue_final_message: Option<bool>,
    /// Variables the chat template is given besides the conversation
    /// (vLLM's and llama-server's `chat_template_kwargs`: Qwen 3's
    /// `enable_thinking`, gpt-oss's `reasoning_effort`…), over the
    /// server's `--chat-template-kwargs`; an object.
    #[serde(default)]
    pub chat_template_kwargs: Option<serde_json::Value>,
    /// OpenAI's `reasoning_effort` (`low`, `medium`, `high`…), given to the
    /// template as `reasoning_effort` unless `chat_template_kwargs` sets it
    /// (gpt-oss's template reads it).
    #[serde(default)]
    pub reasoning_effort: Option<serde_json::Value>,
    /// How to generate.
    #[serde(flatten)]
    pub params: Params,
}

/// `prompt` of `/v1/completions`: text, one text in a list, or token ids.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Prompt {
    /// Text.
    Text(String),
    /// Token ids.
    Tokens(Vec<u32>),
    /// Texts (only one is served).
    Texts(Vec<String>),
}

/// `POST /v1/completions`.
#[derive(Debug, Clone, Deserialize)]
pub struct CompletionRequest {
    /// What to continue.
    pub prompt: Prompt,
    /// Repeat the prompt in the answer (with its tokens'
    /// log-probabilities when `logprobs` asks); `null` is `false`.
    #[serde(default, deserialize_with = "null_is_false")]
    pub echo: bool,
    /// How to generate.
    #[serde(flatten)]
    pub params: Params,
}

/// `GET /v1/models`'s entry.
#[derive(Debug, Clone, Serialize)]
pub struct ModelEntry {
    /// The model's name (what `model` must say).
    pub id: String,
    /// Its other names (`--alias`), as llama-server lists them.
    pub aliases: Vec<String>,
    /// Its tags (`--tags`), as llama-server lists them.
    pub tags: Vec<String>,
    /// `model`.
    pub object: &'static str,
    /// Unix seconds when the server started.
    pub created: u64,
    /// `baton`.
    pub owned_by: &'static str,
}
