//! OpenAI's answer shapes, built in one place: whole answers and stream
//! chunks of `/v1/completions` and `/v1/chat/completions`, their usage
//! counts and (in [`logprobs`]) log-probabilities. `baton serve` sends
//! them as JSON and the Python package returns them as dicts, so both
//! give the same shape for the same fields.
//!
//! Only the answers live here, not the requests: they hold no HTTP, and
//! whatever serves a generation (a server, a Python call) writes them.

pub mod logprobs;
pub mod reasoning;

use serde::Serialize;
use serde_json::Value;

/// Which endpoint's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `/v1/chat/completions`: `chat.completion` answers,
    /// `chat.completion.chunk` chunks.
    Chat,
    /// `/v1/completions`: `text_completion` answers and chunks.
    Completion,
}

/// Token counts of a request.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct Usage {
    /// Tokens of the prompt.
    pub prompt_tokens: usize,
    /// Tokens generated.
    pub completion_tokens: usize,
    /// Their sum.
    pub total_tokens: usize,
    /// How the prompt was read.
    pub prompt_tokens_details: PromptTokensDetails,
    /// What the completion's tokens were.
    pub completion_tokens_details: CompletionTokensDetails,
}

/// OpenAI's `usage.completion_tokens_details`.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct CompletionTokensDetails {
    /// Generated tokens of a reasoning model's thinking (its tags
    /// included), when the answer's thinking is split out; else 0.
    pub reasoning_tokens: usize,
}

/// OpenAI's `usage.prompt_tokens_details`.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct PromptTokensDetails {
    /// Prompt tokens whose keys and values came from the prefix cache.
    pub cached_tokens: usize,
}

impl Usage {
    /// The counts of `prompt` and `completion` tokens, `cached` of the
    /// prompt's from the prefix cache.
    pub fn new(prompt: usize, completion: usize, cached: usize) -> Usage {
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            prompt_tokens_details: PromptTokensDetails { cached_tokens: cached },
            completion_tokens_details: CompletionTokensDetails::default(),
        }
    }

    /// The same counts, `reasoning` of the completion's tokens thinking.
    pub fn with_reasoning(self, reasoning: usize) -> Usage {
        Usage { completion_tokens_details: CompletionTokensDetails { reasoning_tokens: reasoning }, ..self }
    }

    /// The counts of one request's choices (`n`), as OpenAI counts them:
    /// the prompt once (its cached tokens the first choice's), the
    /// completions summed.
    pub fn of_choices(choices: &[Usage]) -> Usage {
        let first = choices.first().copied().unwrap_or(Usage::new(0, 0, 0));
        let completion = choices.iter().map(|u| u.completion_tokens).sum();
        let reasoning = choices.iter().map(|u| u.completion_tokens_details.reasoning_tokens).sum();
        Usage::new(first.prompt_tokens, completion, first.prompt_tokens_details.cached_tokens).with_reasoning(reasoning)
    }
}

/// A chat message in an answer (`message`) or a chunk (`delta`).
#[derive(Debug, Clone, Serialize, Default)]
pub struct Delta {
    /// `assistant` (the first chunk and whole answers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    /// Text; `Some(None)` is `null` (llama-server's first chunk), `None`
    /// leaves the field out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<Option<String>>,
    /// A reasoning model's thinking ([`reasoning`]), when it has some.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// The tools called (OpenAI's `tool_calls` entries).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<Value>>,
}

/// One choice of a chat answer (`message`) or chunk (`delta`).
#[derive(Debug, Clone, Serialize)]
pub struct ChatChoice {
    /// The choice's place (0 to `n` - 1).
    pub index: u32,
    /// The whole message (not streaming).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<Delta>,
    /// The new part (streaming).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delta: Option<Delta>,
    /// Log-probabilities, when asked for (else null).
    pub logprobs: Option<Value>,
    /// `stop`, `length` or `tool_calls` on the last one, else null.
    pub finish_reason: Option<&'static str>,
}

/// One choice of a completion answer or chunk.
#[derive(Debug, Clone, Serialize)]
pub struct TextChoice {
    /// The text (whole, or the new part when streaming).
    pub text: String,
    /// The choice's place (0 to `n` - 1).
    pub index: u32,
    /// Log-probabilities, when asked for (else null).
    pub logprobs: Option<Value>,
    /// `stop` or `length` on the last one, else null.
    pub finish_reason: Option<&'static str>,
}

/// A choice of either endpoint.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Choice {
    /// A chat choice.
    Chat(ChatChoice),
    /// A completion choice.
    Text(TextChoice),
}

/// An answer or a chunk of either endpoint.
#[derive(Debug, Clone, Serialize)]
pub struct Answer {
    /// `chatcmpl-…` or `cmpl-…`.
    pub id: String,
    /// `chat.completion`, `chat.completion.chunk` or `text_completion`.
    pub object: &'static str,
    /// Unix seconds when the request came.
    pub created: u64,
    /// The model's name.
    pub model: String,
    /// The choices (one; none in a usage-only chunk).
    pub choices: Vec<Choice>,
    /// Token counts: on whole answers, and on the last chunk when asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// OpenAI's `system_fingerprint`, the backend that answered:
    /// [`SYSTEM_FINGERPRINT`].
    pub system_fingerprint: &'static str,
    /// llama-server's `timings` (when asked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timings: Option<Value>,
    /// llama-server's `prompt_progress` (a progress chunk's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_progress: Option<Value>,
    /// llama-server's `__verbose` (when asked).
    #[serde(rename = "__verbose", skip_serializing_if = "Option::is_none")]
    pub verbose: Option<Value>,
}

/// What every answer's `system_fingerprint` says: Baton and its version
/// (OpenAI's field names the backend configuration that answered, so that
/// a client can tell when it changed).
pub const SYSTEM_FINGERPRINT: &str = concat!("baton-", env!("CARGO_PKG_VERSION"));

impl Answer {
    /// The answer (or chunk) with its choices' `index` set: the choice
    /// `index` of `n`.
    pub fn indexed(mut self, index: u32) -> Answer {
        for choice in &mut self.choices {
            match choice {
                Choice::Chat(choice) => choice.index = index,
                Choice::Text(choice) => choice.index = index,
            }
        }
        self
    }

    /// One answer of several choices (`n`): the choices of `answers` in
    /// order, each indexed by its place, and their counts
    /// ([`Usage::of_choices`]); `None` without answers.
    pub fn of_choices(answers: Vec<Answer>) -> Option<Answer> {
        let usages: Vec<Usage> = answers.iter().filter_map(|a| a.usage).collect();
        let mut answers = answers.into_iter().enumerate();
        let (_, mut whole) = answers.next()?;
        for (index, answer) in answers {
            whole.choices.extend(answer.indexed(index as u32).choices);
        }
        whole.usage = (!usages.is_empty()).then(|| Usage::of_choices(&usages));
        Some(whole)
    }

    /// The answer as JSON text.
    pub fn to_json(&self) -> String {
        // Serializing cannot fail: every map's keys are strings and every
        // number is finite (log-probabilities go through `logprobs`).
        serde_json::to_string(self).unwrap_or_else(|e| unreachable!("an answer serializes: {e}"))
    }
}

/// What every answer and chunk of one request repeats, and the shapes
/// built from it.
#[derive(Debug, Clone)]
pub struct Answers {
    /// The endpoint.
    pub kind: Kind,
    /// The answer's id.
    pub id: String,
    /// Unix seconds of the request.
    pub created: u64,
    /// The model's name.
    pub model: String,
}

impl Answers {
    fn answer(&self, object: &'static str, choices: Vec<Choice>, usage: Option<Usage>) -> Answer {
        let (id, model) = (self.id.clone(), self.model.clone());
        Answer {
            id,
            object,
            created: self.created,
            model,
            choices,
            usage,
            system_fingerprint: SYSTEM_FINGERPRINT,
            timings: None,
            prompt_progress: None,
            verbose: None,
        }
    }

    /// A chunk with `text` and its tokens' `logprobs` (and `finish`, on
    /// the last). A chat chunk's delta holds `text` when there is one
    /// (none: `{}`); a completion chunk's text is `""` without one.
    pub fn chunk(&self, text: Option<String>, logprobs: Option<Value>, finish: Option<&'static str>) -> Answer {
        match self.kind {
            Kind::Chat => {
                let delta = Delta { content: text.map(Some), ..Delta::default() };
                self.chat_chunk(delta, logprobs, finish)
            }
            Kind::Completion => {
                let choice = TextChoice { index: 0, text: text.unwrap_or_default(), logprobs, finish_reason: finish };
                self.answer("text_completion", vec![Choice::Text(choice)], None)
            }
        }
    }

    /// A chat chunk with `delta`.
    pub fn chat_chunk(&self, delta: Delta, logprobs: Option<Value>, finish: Option<&'static str>) -> Answer {
        let choice = ChatChoice { index: 0, message: None, delta: Some(delta), logprobs, finish_reason: finish };
        self.answer("chat.completion.chunk", vec![Choice::Chat(choice)], None)
    }

    /// The chunk with no choices and the `usage` (a stream's last, when
    /// asked).
    pub fn usage_chunk(&self, usage: Usage) -> Answer {
        let object = match self.kind {
            Kind::Chat => "chat.completion.chunk",
            Kind::Completion => "text_completion",
        };
        self.answer(object, Vec::new(), Some(usage))
    }

    /// A chat stream's first chunk: the assistant's role, with `content`
    /// when given (`Some(None)`: `null`, as llama-server sends; OpenAI
    /// sends `""`; llama-cpp-python sends none).
    pub fn opening(&self, content: Option<Option<String>>) -> Answer {
        self.chat_chunk(Delta { role: Some("assistant"), content, ..Delta::default() }, None, None)
    }

    /// The whole answer: `text` (the assistant's message, for chat).
    pub fn whole(&self, text: String, logprobs: Option<Value>, finish: &'static str, usage: Usage) -> Answer {
        match self.kind {
            Kind::Chat => {
                let message = Delta { role: Some("assistant"), content: Some(Some(text)), ..Delta::default() };
                self.whole_message(message, logprobs, finish, usage)
            }
            Kind::Completion => {
                let choice = TextChoice { index: 0, text, logprobs, finish_reason: Some(finish) };
                self.answer("text_completion", vec![Choice::Text(choice)], Some(usage))
            }
        }
    }

    /// A whole chat answer with `message`.
    pub fn whole_message(&self, message: Delta, logprobs: Option<Value>, finish: &'static str, usage: Usage) -> Answer {
        let choice =
            ChatChoice { index: 0, message: Some(message), delta: None, logprobs, finish_reason: Some(finish) };
        self.answer("chat.completion", vec![Choice::Chat(choice)], Some(usage))
    }
}
