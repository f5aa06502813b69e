//! What a client asks the engine for, and what comes back.

use std::sync::Arc;

use baton_gen::constraint::{Constraint, Grammar, GrammarSource};
use baton_gen::{SamplingError, SamplingParams, TokenLogprobs};

use super::grammars::Grammars;
use super::scope::CacheScope;

/// One generation: a tokenized prompt and how to continue it.
#[derive(Clone, Debug)]
pub struct GenerateRequest {
    /// The prompt's token ids (special tokens already in place).
    pub prompt: Vec<u32>,
    /// Most tokens to generate; `None` = until the end-of-generation token
    /// or the sequence's context is full.
    pub max_tokens: Option<usize>,
    /// How tokens are drawn (temperature, filters, penalties, seed).
    pub sampling: SamplingParams,
    /// Stop at an end-of-generation token (the end of text, or any control
    /// token such as an end of turn). `false` generates through them.
    pub stop_at_eog: bool,
    /// Send each token's log-probability, with this many of the most likely
    /// alternatives (at most [`MAX_TOP_LOGPROBS`]), as an
    /// [`Event::Logprobs`] before its [`Event::Token`]; `None`: not sent.
    pub logprobs: Option<usize>,
    /// The log-probabilities sent are those of the distribution each token
    /// was drawn from (the sampler's candidates after its filters, at its
    /// temperature: llama-server's `post_sampling_probs`), not the
    /// model's.
    pub post_sampling: bool,
    /// What the text must be: free text, or a grammar's text (decoding held
    /// to it; the generation ends with `Stop` when the text is whole).
    pub format: OutputFormat,
    /// Whose cached prompts it may reuse, and whom its own serve: only
    /// requests of the same scope share prefixes ([`CacheScope::SHARED`]
    /// for all that name none).
    pub cache_scope: CacheScope,
}

/// What a generation's text must be.
#[derive(Clone, Debug, Default)]
pub enum OutputFormat {
    /// Any text.
    #[default]
    Text,
    /// A text the grammar accepts: `response_format` `json_object` or
    /// `json_schema`, llama-server's `grammar` (GBNF), or a required tool
    /// call's (see [`tool_call_grammar`](baton_gen::constraint::tool_call_grammar)).
    Grammar(Arc<Grammar>),
    /// A grammar not compiled yet: [`Engine::submit`](super::Engine::submit)
    /// compiles it against the model's vocabulary (see
    /// [`compiled`](Self::compiled)), so no request runs with one.
    Source(Arc<GrammarSource>),
    /// Free text, or tool calls held to the grammar once the text opens
    /// with the calls' opening tag, the second field
    /// ([`TOOL_CALL_OPEN`](baton_gen::constraint::TOOL_CALL_OPEN) or
    /// another format's; `tool_choice: "auto"`; see
    /// [`Constraint::call_or_text_opened_by`]).
    CallOrText(Arc<Grammar>, &'static str),
    /// [`CallOrText`](Self::CallOrText) whose grammar is not compiled yet
    /// (as [`Source`](Self::Source)).
    CallOrTextSource(Arc<GrammarSource>, &'static str),
    /// Free text, and a call held to the grammar from the moment one of
    /// the triggers (the second field) appears in it (gpt-oss's
    /// `tool_choice: "auto"`; see [`Constraint::triggered`]).
    Triggered(Arc<Grammar>, &'static [&'static str]),
    /// [`Triggered`](Self::Triggered) whose grammar is not compiled yet.
    TriggeredSource(Arc<GrammarSource>, &'static [&'static str]),
}

impl OutputFormat {
    /// An OpenAI `response_format`: `{"type": "text"}`, `{"type":
    /// "json_object"}`, or `{"type": "json_schema", "json_schema": {"name":
    /// …, "schema": {…}}}`, as a [`Source`](Self::Source) to compile; `Err`
    /// says what is wrong with its shape.
    pub fn from_response_format(value: &serde_json::Value) -> Result<OutputFormat, String> {
        let source = |source| Ok(OutputFormat::Source(Arc::new(source)));
        match value.get("type").and_then(serde_json::Value::as_str) {
            Some("text") => Ok(OutputFormat::Text),
            // llama-server's: a `json_object` with its `schema` is held to it.
            Some("json_object") => match value.get("schema") {
                None | Some(serde_json::Value::Null) => source(GrammarSource::JsonObject),
                Some(schema) if schema.is_object() || schema.is_boolean() => {
                    source(GrammarSource::JsonSchema(schema.clone()))
                }
                Some(schema) => Err(format!("json_object.schema is a JSON Schema (an object), not {schema}")),
            },
            Some("json_schema") => {
                let spec = value
                    .get("json_schema")
                    .filter(|s| s.is_object())
                    .ok_or("json_schema: an object with the schema under \"schema\" is missing")?;
                if spec.get("name").is_some_and(|n| !n.is_string()) {
                    return Err("json_schema.name is a string".into());
                }
                // Without a schema, any JSON text (OpenAI's default).
                let schema = spec.get("schema").unwrap_or(&serde_json::Value::Bool(true));
                if !(schema.is_object() || schema.is_boolean()) {
                    return Err(format!("json_schema.schema is a JSON Schema (an object), not {schema}"));
                }
                source(GrammarSource::JsonSchema(schema.clone()))
            }
            _ => Err(format!(
                "{value}: {{\"type\": \"text\"}}, {{\"type\": \"json_object\"}} or {{\"type\": \"json_schema\"}}"
            )),
        }
    }

    /// `source` compiled against `grammars`; `Err` says why it cannot be
    /// (naming the construct a schema cannot be held to).
    pub fn grammar(source: &GrammarSource, grammars: &Grammars) -> Result<OutputFormat, String> {
        let vocabulary = grammars.vocabulary().map_err(|e| e.to_string())?;
        let grammar = vocabulary.compile(source).map_err(|e| e.to_string())?;
        Ok(OutputFormat::Grammar(Arc::new(grammar)))
    }

    /// This format with a [`Source`](Self::Source) or
    /// [`CallOrTextSource`](Self::CallOrTextSource) or
    /// [`TriggeredSource`](Self::TriggeredSource) compiled against
    /// `grammars` (any other format as it is).
    pub fn compiled(self, grammars: &Grammars) -> Result<OutputFormat, String> {
        match self {
            OutputFormat::Source(source) => match &*source {
                GrammarSource::JsonSchema(_) => {
                    OutputFormat::grammar(&source, grammars).map_err(|e| format!("json_schema.schema: {e}"))
                }
                _ => OutputFormat::grammar(&source, grammars),
            },
            OutputFormat::CallOrTextSource(source, open) => match OutputFormat::grammar(&source, grammars)? {
                OutputFormat::Grammar(grammar) => Ok(OutputFormat::CallOrText(grammar, open)),
                other => Ok(other),
            },
            OutputFormat::TriggeredSource(source, triggers) => match OutputFormat::grammar(&source, grammars)? {
                OutputFormat::Grammar(grammar) => Ok(OutputFormat::Triggered(grammar, triggers)),
                other => Ok(other),
            },
            other => Ok(other),
        }
    }

    /// Whether the whole text is held to a format (no stop strings apply:
    /// the format ends it), rather than free text that may call a tool.
    pub fn holds_whole_text(&self) -> bool {
        match self {
            OutputFormat::Text
            | OutputFormat::CallOrText(..)
            | OutputFormat::CallOrTextSource(..)
            | OutputFormat::Triggered(..)
            | OutputFormat::TriggeredSource(..) => false,
            OutputFormat::Grammar(_) | OutputFormat::Source(_) => true,
        }
    }

    /// The constraint decoding is held to (`None` for free text, and for
    /// a format not compiled yet, which the engine compiles before a
    /// request runs).
    pub fn constraint(&self) -> Option<Constraint> {
        match self {
            OutputFormat::Text
            | OutputFormat::Source(_)
            | OutputFormat::CallOrTextSource(..)
            | OutputFormat::TriggeredSource(..) => None,
            OutputFormat::Grammar(grammar) => Some(Constraint::grammar(grammar)),
            OutputFormat::CallOrText(grammar, open) => Some(Constraint::call_or_text_opened_by(grammar, open)),
            OutputFormat::Triggered(grammar, triggers) => Some(Constraint::triggered(grammar, triggers)),
        }
    }
}

impl GenerateRequest {
    /// `max_tokens` greedy tokens after `prompt`, through end-of-generation
    /// tokens, without log-probabilities (what benchmarks and tests run).
    pub fn greedy(prompt: Vec<u32>, max_tokens: usize) -> GenerateRequest {
        GenerateRequest {
            prompt,
            max_tokens: Some(max_tokens),
            sampling: SamplingParams::greedy(),
            stop_at_eog: false,
            logprobs: None,
            post_sampling: false,
            format: OutputFormat::Text,
            cache_scope: CacheScope::SHARED,
        }
    }
}

/// Most alternatives a request may ask log-probabilities of.
pub const MAX_TOP_LOGPROBS: usize = 20;

/// Why a generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// An end-of-generation token (not sent as a token).
    Stop,
    /// `max_tokens`, or the sequence's context is full.
    Length,
}

/// The end of a generation, with its token counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Finish {
    /// Why it ended.
    pub reason: FinishReason,
    /// Tokens of the prompt.
    pub prompt_tokens: usize,
    /// Tokens generated (sent as [`Event::Token`]).
    pub completion_tokens: usize,
    /// Tokens of the prompt whose keys and values came from the prefix
    /// cache (not evaluated again).
    pub cached_tokens: usize,
}

/// What the engine sends a generation, in order: tokens, then exactly one
/// [`Event::Done`] or [`Event::Failed`].
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// The request took a sequence slot (the first event): how many of its
    /// prompt's first tokens the slot's cache already held.
    Started {
        /// Prompt tokens not evaluated again.
        cached_tokens: usize,
    },
    /// A chunk of the prompt was evaluated: `read` of its tokens (the
    /// cached ones included) are in the cache now (llama-server's prompt
    /// progress). One per chunk, while the prompt is read.
    Progress {
        /// Prompt tokens in the cache after this chunk.
        read: usize,
    },
    /// The log-probabilities of the token the next [`Event::Token`] sends
    /// (only when the request asks for them).
    Logprobs(TokenLogprobs),
    /// The next generated token.
    Token(u32),
    /// The generation ended normally.
    Done(Finish),
    /// The generation failed (the model or a device failed); the message
    /// says why.
    Failed(String),
}

/// Why the engine did not take a request (the client's error: nothing was
/// queued).
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// The prompt has no tokens.
    #[error("the prompt is empty")]
    EmptyPrompt,
    /// A token id is outside the vocabulary.
    #[error("token id {id} is outside the vocabulary of {vocab}")]
    BadToken {
        /// The id.
        id: u32,
        /// The vocabulary size.
        vocab: usize,
    },
    /// The prompt leaves no room to generate in one sequence's context.
    #[error(
        "the prompt has {prompt} tokens; a sequence's context holds {context}, and at least one must be generated"
    )]
    PromptTooLong {
        /// Tokens of the prompt.
        prompt: usize,
        /// Positions of one sequence's context.
        context: usize,
    },
    /// The prompt plus `max_tokens` do not fit in one sequence's context.
    #[error("the prompt ({prompt} tokens) plus max_tokens ({max_tokens}) exceed a sequence's context of {context}")]
    ExceedsContext {
        /// Tokens of the prompt.
        prompt: usize,
        /// Tokens asked for.
        max_tokens: usize,
        /// Positions of one sequence's context.
        context: usize,
    },
    /// A text to embed or score longer than a sequence's context.
    #[error("the text has {tokens} tokens; a sequence's context holds {context}")]
    TextTooLong {
        /// Tokens of the text.
        tokens: usize,
        /// Positions of one sequence's context.
        context: usize,
    },
    /// `max_tokens` is 0.
    #[error("max_tokens must be at least 1")]
    ZeroMaxTokens,
    /// More log-probability alternatives than served.
    #[error("at most {max} alternatives' log-probabilities are served, not {asked}")]
    TooManyLogprobs {
        /// Alternatives asked for.
        asked: usize,
        /// [`MAX_TOP_LOGPROBS`].
        max: usize,
    },
    /// The sampling parameters are invalid.
    #[error(transparent)]
    Sampling(#[from] SamplingError),
    /// The format's grammar cannot be compiled; the text says why.
    #[error("response_format: {0}")]
    Grammar(String),
    /// The request drafts with the model's prediction head (`mtp`), and
    /// the engine was not started with its heads.
    #[error(
        "speculative.type mtp: this server does not draft with the model's prediction head (start it with \
         --spec-type mtp on a file that holds the block)"
    )]
    NoMtpHead,
    /// Every sequence slot is busy and the waiting queue is full.
    #[error("the server is busy: {running} requests running and {queued} waiting (the queue's limit)")]
    QueueFull {
        /// Requests running.
        running: usize,
        /// Requests waiting.
        queued: usize,
    },
    /// Lent work asked for a reserved slot the engine does not have.
    #[error("reserved slot {index} asked for; the engine lends {lent}")]
    NoLentSlot {
        /// The slot asked for (of the lent ones).
        index: usize,
        /// Slots the engine lends ([`EngineOptions::lent_slots`](super::EngineOptions::lent_slots)).
        lent: usize,
    },
    /// The engine is shutting down.
    #[error("the engine is shutting down")]
    ShuttingDown,
    /// The engine stopped for good after a failure; the text says why.
    #[error("the engine has stopped: {0}")]
    EngineFailed(String),
}
