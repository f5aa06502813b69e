//! Generation over a Baton model: choosing each next token ([`Sampler`]),
//! holding the text to a format ([`constraint`]), chat templates and
//! conversations that keep their KV cache, speculative decoding that
//! changes no token ([`speculative`]), perplexity over a text, and
//! OpenAI's answer shapes ([`openai`]) that the server and the Python
//! package both give.
//!
//! No device code: everything here drives a [`baton_model::Model`]
//! (evaluates tokens, reads logits) and works on host memory. The server
//! (baton-serve), the command line and the Python package all generate
//! through it.
#![deny(missing_docs)]

mod chat;
mod chat_json;
mod chat_named;
mod chat_time;
mod chat_tokens;
mod chat_values;
pub mod constraint;
mod conversation;
mod logprobs;
pub mod openai;
mod perplexity;
mod sampling;
pub mod speculative;
mod stop;

// Choosing the next token.
pub use sampling::{Candidate, LogitBias, Sampler, SamplingError, SamplingParams, DEFAULT_SEED};

// Chat: templates and conversations that keep their KV cache.
pub use chat::{ChatError, ChatTemplate, Message, TemplateOrigin};
pub use chat_named::{named_template, TEMPLATE_NAMES};
pub use conversation::{Conversation, ConversationError, PromptStats};

// What a token was given, and where a stop string ends the text.
pub use logprobs::{candidate_logprobs, token_logprobs, TokenLogprobs};
pub use stop::{Released, StopMatcher};

// Measuring a model: perplexity over a text.
pub use perplexity::{perplexity, PerplexityOptions, PerplexityResult};
