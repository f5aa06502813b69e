//! Log-probabilities in OpenAI's shapes: chat's `logprobs.content[]`
//! (`token`, `logprob`, `bytes`, `top_logprobs[]`) and the completions
//! endpoint's `tokens`, `token_logprobs`, `top_logprobs` (a map per token)
//! and `text_offset`. Chat's object carries `refusal: null`, as OpenAI's
//! and llama-cpp-python's do.

use baton_model::Tokenizer;
use serde_json::{json, Map, Value};

use crate::TokenLogprobs;

/// Renders the entries of one answer or of successive chunks (the
/// completions' `text_offset` runs on from chunk to chunk).
#[derive(Debug)]
pub struct LogprobsWriter {
    /// Chat's shape, else the completions endpoint's.
    chat: bool,
    /// Characters of the text the entries so far stand for, whole
    /// characters only (OpenAI's and llama-server's `text_offset` counts
    /// the characters of the text returned).
    offset: usize,
    /// Bytes of a character the last tokens began and did not finish: it
    /// counts once a later token completes it.
    unfinished: Vec<u8>,
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
        LogprobsWriter { chat, offset: 0, unfinished: Vec::new(), unscored: None }
    }

    /// Renders `token` first in the next completions' `logprobs`, with
    /// `null` for its log-probability and alternatives (nothing came
    /// before it to predict it), as `echo` shows a prompt's first token.
    pub fn unscored(&mut self, token: u32) {
        self.unscored = Some(token);
    }

    /// Moves the offset past a token's `bytes`: past every character they
    /// complete (an invalid sequence counts as the one U+FFFD it is
    /// decoded as), keeping the bytes of one they leave unfinished.
    fn advance(&mut self, bytes: &[u8]) {
        self.unfinished.extend_from_slice(bytes);
        let mut start = 0;
        loop {
            match std::str::from_utf8(&self.unfinished[start..]) {
                Ok(valid) => {
                    self.offset += valid.chars().count();
                    start = self.unfinished.len();
                    break;
                }
                Err(error) => {
                    let valid_end = start + error.valid_up_to();
                    // The prefix up to `valid_end` is valid UTF-8.
                    self.offset += String::from_utf8_lossy(&self.unfinished[start..valid_end]).chars().count();
                    match error.error_len() {
                        Some(len) => {
                            self.offset += 1;
                            start = valid_end + len;
                        }
                        None => {
                            start = valid_end;
                            break;
                        }
                    }
                }
            }
        }
        self.unfinished.drain(..start);
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
                json!({ "content": content, "refusal": null })
            }
            false => {
                let (mut tokens, mut logprobs, mut tops, mut offsets) = (vec![], vec![], vec![], vec![]);
                if let Some(first) = self.unscored.take() {
                    let (token, bytes) = piece(tokenizer, first);
                    offsets.push(self.offset);
                    self.advance(&bytes);
                    tokens.push(token);
                    logprobs.push(Value::Null);
                    tops.push(Value::Null);
                }
                for e in entries {
                    let (token, bytes) = piece(tokenizer, e.token);
                    offsets.push(self.offset);
                    self.advance(&bytes);
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

#[cfg(test)]
mod tests {
    use baton_model::baton_tokenizer::{synthetic_bpe, EncodeOptions};

    use super::*;

    fn entry(token: u32) -> TokenLogprobs {
        TokenLogprobs { token, logprob: -1.0, top: vec![] }
    }

    /// Each token's offset: the characters of `text` whose bytes all come
    /// before the token's first byte (a character split across tokens
    /// counts once it is whole).
    fn expected_offsets(text: &str, tokenizer: &Tokenizer, ids: &[u32]) -> Vec<usize> {
        let mut start = 0;
        ids.iter()
            .map(|&id| {
                let whole = text.char_indices().filter(|(at, c)| at + c.len_utf8() <= start).count();
                start += tokenizer.token_bytes(id, true).expect("a token").len();
                whole
            })
            .collect()
    }

    #[test]
    fn text_offsets_count_the_characters_of_the_text_not_the_tokens() {
        let tokenizer = Tokenizer::from_config(&synthetic_bpe(512)).expect("tokenizer");
        let text = "東京 is big";
        let ids = tokenizer.encode(text, EncodeOptions::default()).expect("encode");
        assert!(ids.len() > text.chars().count() - 2, "東京 must split into byte tokens: {ids:?}");
        let want = expected_offsets(text, &tokenizer, &ids);
        let offsets = |value: &Value| -> Vec<usize> {
            let list = value["text_offset"].as_array().expect("text_offset");
            list.iter().map(|o| o.as_u64().expect("an offset") as usize).collect()
        };
        // Whole, as the echo of a prompt renders it.
        let mut writer = LogprobsWriter::new(false);
        writer.unscored(ids[0]);
        let entries: Vec<TokenLogprobs> = ids[1..].iter().map(|&t| entry(t)).collect();
        let whole = offsets(&writer.render(&entries, &tokenizer));
        assert_eq!(whole, want, "tokens {ids:?}");
        let mut at = 0;
        let is = ids
            .iter()
            .position(|&id| {
                let start = at;
                at += tokenizer.token_bytes(id, true).map_or(0, <[u8]>::len);
                start == "東京".len()
            })
            .expect("a token starts at \" is\"");
        assert_eq!(whole[is], 2, "\" is\" starts after 東京");
        // In chunks split inside a character, as a stream renders them.
        let mut writer = LogprobsWriter::new(false);
        let mut streamed = Vec::new();
        for &id in &ids {
            streamed.extend(offsets(&writer.render(&[entry(id)], &tokenizer)));
        }
        assert_eq!(streamed, want, "streamed one token a chunk");
    }
}
