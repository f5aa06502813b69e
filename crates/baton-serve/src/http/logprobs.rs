//! Log-probabilities in OpenAI's shapes: chat's `logprobs.content[]`
//! (`token`, `logprob`, `bytes`, `top_logprobs[]`) and the completions
//! endpoint's `tokens`, `token_logprobs`, `top_logprobs` (a map per token)
//! and `text_offset`.

use baton_llama::Tokenizer;
use serde_json::{json, Map, Value};

use crate::engine::TokenLogprobs;

/// Renders the entries of one answer or of successive chunks (the
/// completions' `text_offset` runs on from chunk to chunk).
#[derive(Debug)]
pub struct LogprobsWriter {
    /// Chat's shape, else the completions endpoint's.
    chat: bool,
    /// Characters of the text the entries so far stand for.
    offset: usize,
    /// A first token to render before the next entries, without a
    /// log-probability (a prompt's first token under `echo`).
    unscored: Option<u32>,
}

/// A token's text (special tokens as their text) and bytes.
fn piece(tokenizer: &Tokenizer, id: u32) -> (String, Vec<u8>) {
    let bytes = tokenizer.token_bytes(id, true).map(<[u8]>::to_vec).unwrap_or_default();
    (String::from_utf8_lossy(&bytes).into_owned(), bytes)
}

/// A log-probability as JSON: a number, or -9999 for minus infinity (which
/// JSON cannot hold; OpenAI's convention for "never").
fn number(logprob: f32) -> Value {
    if logprob.is_finite() {
        json!(logprob)
    } else {
        json!(-9999.0)
    }
}

impl LogprobsWriter {
    /// A writer for chat answers (`chat`) or completions.
    pub fn new(chat: bool) -> LogprobsWriter {
        LogprobsWriter { chat, offset: 0, unscored: None }
    }

    /// Renders `token` first in the next completions' `logprobs`, with
    /// `null` for its log-probability and alternatives (nothing came
    /// before it to predict it), as `echo` shows a prompt's first token.
    pub fn unscored(&mut self, token: u32) {
        self.unscored = Some(token);
    }

    /// The `logprobs` object of a choice holding `entries`.
    pub fn render(&mut self, entries: &[TokenLogprobs], tokenizer: &Tokenizer) -> Value {
        match self.chat {
            true => {
                let content: Vec<Value> = entries
                    .iter()
                    .map(|e| {
                        let (token, bytes) = piece(tokenizer, e.token);
                        let top: Vec<Value> = e
                            .top
                            .iter()
                            .map(|&(id, logprob)| {
                                let (token, bytes) = piece(tokenizer, id);
                                json!({ "token": token, "logprob": number(logprob), "bytes": bytes })
                            })
                            .collect();
                        json!({ "token": token, "logprob": number(e.logprob), "bytes": bytes, "top_logprobs": top })
                    })
                    .collect();
                json!({ "content": content })
            }
            false => {
                let (mut tokens, mut logprobs, mut tops, mut offsets) = (vec![], vec![], vec![], vec![]);
                if let Some(first) = self.unscored.take() {
                    let (token, _) = piece(tokenizer, first);
                    offsets.push(self.offset);
                    self.offset += token.chars().count();
                    tokens.push(token);
                    logprobs.push(Value::Null);
                    tops.push(Value::Null);
                }
                for e in entries {
                    let (token, _) = piece(tokenizer, e.token);
                    offsets.push(self.offset);
                    self.offset += token.chars().count();
                    tokens.push(token);
                    logprobs.push(number(e.logprob));
                    let top: Map<String, Value> =
                        e.top.iter().map(|&(id, logprob)| (piece(tokenizer, id).0, number(logprob))).collect();
                    tops.push(Value::Object(top));
                }
                json!({ "tokens": tokens, "token_logprobs": logprobs, "top_logprobs": tops, "text_offset": offsets })
            }
        }
    }
}
