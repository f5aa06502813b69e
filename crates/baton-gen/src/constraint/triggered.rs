//! A lazy grammar: free text until one of its triggers appears anywhere
//! in it, then the grammar (whose texts start with a trigger) holds the
//! rest, from the trigger on, as llama.cpp's grammar triggers do. Used for
//! gpt-oss's `tool_choice: "auto"`: the model may think and answer freely,
//! and a call it starts on the commentary channel is held to the tools.
//!
//! The token that completes a trigger may carry bytes after it; the text
//! from the trigger on is tokenized again and fed to a fresh matcher (the
//! grammar reads bytes, so any tokenization of them fits), and the token
//! is refused when those bytes cannot start one of the grammar's texts.

use baton_tokenizer::{EncodeOptions, Tokenizer};

use super::grammar::{Grammar, GrammarMatcher};

/// Free text watched for triggers.
#[derive(Clone, Debug)]
pub(super) struct Triggered {
    /// What starts the grammar's texts.
    triggers: &'static [&'static str],
    /// The grammar's matcher before any text.
    fresh: Box<GrammarMatcher>,
    /// The text's last bytes, fewer than the longest trigger's (no trigger
    /// whole among them).
    tail: Vec<u8>,
}

/// What a token does to the watched text.
pub(super) enum Step {
    /// It stays free text; the new tail.
    Free(Vec<u8>),
    /// It completes a trigger: the grammar's matcher after the text from
    /// the trigger on.
    Held(Box<GrammarMatcher>),
    /// It completes a trigger with bytes the grammar does not take.
    Refused,
}

impl Triggered {
    /// Free text that `grammar` holds from any of `triggers` on.
    pub(super) fn new(grammar: &Grammar, triggers: &'static [&'static str]) -> Triggered {
        Triggered { triggers, fresh: Box::new(grammar.matcher()), tail: Vec::new() }
    }

    /// What `token` would do (the watched text is left as it was).
    pub(super) fn step(&self, token: u32, tokenizer: &Tokenizer) -> Step {
        let Ok(bytes) = tokenizer.token_bytes(token, false) else { return Step::Refused };
        let mut text = self.tail.clone();
        text.extend_from_slice(bytes);
        let found = self.triggers.iter().filter_map(|trigger| find(&text, trigger.as_bytes())).min();
        let Some(at) = found else {
            let longest = self.triggers.iter().map(|t| t.len()).max().unwrap_or(1);
            let keep = text.len().saturating_sub(longest - 1);
            return Step::Free(text.split_off(keep));
        };
        let Ok(from_trigger) = std::str::from_utf8(&text[at..]) else { return Step::Refused };
        let options = EncodeOptions { add_special: false, parse_special: false };
        let Ok(tokens) = tokenizer.encode(from_trigger, options) else { return Step::Refused };
        let mut matcher = self.fresh.clone();
        match tokens.iter().all(|&t| matcher.accept(t)) {
            true => Step::Held(matcher),
            false => Step::Refused,
        }
    }

    /// Takes a token that stays free text.
    pub(super) fn keep(&mut self, tail: Vec<u8>) {
        self.tail = tail;
    }

    /// Sets the logit of every token a [`Step::Refused`] to minus infinity;
    /// how many may come next.
    pub(super) fn mask(&self, logits: &mut [f32], tokenizer: &Tokenizer) -> usize {
        let mut count = 0;
        for (id, logit) in logits.iter_mut().enumerate() {
            if *logit == f32::NEG_INFINITY {
                continue;
            }
            match self.step(id as u32, tokenizer) {
                Step::Refused => *logit = f32::NEG_INFINITY,
                Step::Free(_) | Step::Held(_) => count += 1,
            }
        }
        count
    }
}

/// Where `needle` first occurs in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}
