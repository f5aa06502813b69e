//! Grammars held by llguidance: JSON Schemas (with the defaults of
//! [`json_defaults`](super::json_defaults)), GBNF, regular expressions and
//! Lark.
//!
//! A [`GrammarVocabulary`] is built once per tokenizer: llguidance's token
//! trie over each token id's bytes (a control, unknown or unused token is
//! a special token no text matches, written `\xff<name>`), with the
//! tokenizer's end-of-sequence token as the trie's. It compiles a
//! [`GrammarSource`] into a [`Grammar`] once per request; each sequence
//! runs its own [`GrammarMatcher`], a copy of the compiled parser.
//!
//! The matcher answers the two questions of Baton's draw-then-check
//! sampling: does one token fit ([`GrammarMatcher::allows`], a walk of the
//! token's bytes), and which tokens fit ([`GrammarMatcher::mask`], the whole
//! vocabulary, computed only when the drawn token did not fit). Every
//! end-of-generation token (the end of sequence, or any control token)
//! stands for the end of the text: it fits where the grammar may end.

use std::sync::Arc;

use baton_tokenizer::{TokenType, Tokenizer};
use llguidance::api::TopLevelGrammar;
use llguidance::{Matcher, ParserFactory, TokenParser};
use toktrie::{ApproximateTokEnv, TokRxInfo, TokTrie};

use super::gbnf::{gbnf_to_lark, GbnfError};
use super::json_defaults::with_defaults;

/// The stack of the thread a grammar compiles on (address space, touched
/// only as deep as the compiler recurses).
pub const COMPILE_STACK_BYTES: usize = 256 << 20;

/// What a text is held to, as a client gives it.
#[derive(Debug, Clone, PartialEq)]
pub enum GrammarSource {
    /// One JSON object (`response_format: {"type": "json_object"}`).
    JsonObject,
    /// A JSON text the schema accepts.
    JsonSchema(serde_json::Value),
    /// A GBNF grammar (llama.cpp's format).
    Gbnf(String),
    /// A regular expression the whole text matches.
    Regex(String),
    /// A grammar in llguidance's Lark-like syntax.
    Lark(String),
}

impl GrammarSource {
    /// What the source is, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            GrammarSource::JsonObject => "json_object",
            GrammarSource::JsonSchema(_) => "JSON schema",
            GrammarSource::Gbnf(_) => "GBNF grammar",
            GrammarSource::Regex(_) => "regular expression",
            GrammarSource::Lark(_) => "Lark grammar",
        }
    }
}

/// Why a grammar could not be built.
#[derive(Debug, Clone, thiserror::Error)]
pub enum GrammarError {
    /// The GBNF text could not be read.
    #[error(transparent)]
    Gbnf(#[from] GbnfError),
    /// llguidance refused the grammar; its message says why.
    #[error("the {kind} cannot be held to: {message}")]
    Refused {
        /// [`GrammarSource::kind`].
        kind: &'static str,
        /// llguidance's message.
        message: String,
    },
    /// The tokenizer has no end-of-sequence token to end a text with.
    #[error("the tokenizer has no end-of-sequence token, which a grammar needs to end the text")]
    NoEndOfSequence,
}

/// llguidance's view of one tokenizer: its token trie and the parser
/// factory that compiles grammars against it. Built once per tokenizer.
pub struct GrammarVocabulary {
    factory: ParserFactory,
    /// Per token id: it ends the text (end of sequence or control).
    ends: Vec<bool>,
    eos: u32,
}

impl std::fmt::Debug for GrammarVocabulary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrammarVocabulary").field("tokens", &self.ends.len()).field("eos", &self.eos).finish()
    }
}

impl GrammarVocabulary {
    /// The trie of `tokenizer`'s vocabulary.
    pub fn new(tokenizer: &Tokenizer) -> Result<GrammarVocabulary, GrammarError> {
        let eos = tokenizer.eos_id().ok_or(GrammarError::NoEndOfSequence)?;
        let size = tokenizer.vocab_size();
        let mut words = Vec::with_capacity(size);
        let mut ends = Vec::with_capacity(size);
        for id in 0..size as u32 {
            let kind = tokenizer.token_type(id).unwrap_or(TokenType::Unused);
            let bytes = tokenizer.token_bytes(id, false).unwrap_or_default();
            ends.push(id == eos || kind == TokenType::Control);
            let mut word = bytes.to_vec();
            if word.is_empty() || matches!(kind, TokenType::Control | TokenType::Unknown | TokenType::Unused) {
                // A special token: the marker byte, then its name.
                word =
                    [&[TokTrie::SPECIAL_TOKEN_MARKER][..], tokenizer.token_text(id).unwrap_or("").as_bytes()].concat();
                if word.len() == 1 {
                    word.extend_from_slice(format!("<[{id}]>").as_bytes());
                }
            }
            words.push(word);
        }
        let info = TokRxInfo::new(size as u32, eos);
        let trie = TokTrie::from(&info, &words);
        let env: toktrie::TokEnv = Arc::new(ApproximateTokEnv::new(trie));
        let mut factory = ParserFactory::new_simple(&env)
            .map_err(|e| GrammarError::Refused { kind: "vocabulary", message: e.to_string() })?;
        factory.quiet();
        Ok(GrammarVocabulary { factory, ends, eos })
    }

    /// Compiles `source` (a few milliseconds for a schema; once per
    /// request).
    pub fn compile(self: &Arc<Self>, source: &GrammarSource) -> Result<Grammar, GrammarError> {
        let kind = source.kind();
        let grammar = match source {
            GrammarSource::JsonObject => {
                TopLevelGrammar::from_json_schema(with_defaults(&serde_json::json!({"type": "object"})))
            }
            GrammarSource::JsonSchema(schema) => TopLevelGrammar::from_json_schema(with_defaults(schema)),
            GrammarSource::Gbnf(text) => TopLevelGrammar::from_lark(gbnf_to_lark(text)?),
            GrammarSource::Regex(pattern) => TopLevelGrammar::from_regex(pattern),
            GrammarSource::Lark(text) => TopLevelGrammar::from_lark(text.clone()),
        };
        // llguidance compiles schemas recursively: a long chain of `$ref`s
        // would overflow a small thread stack (an abort, not an error).
        let compiled = std::thread::scope(|scope| {
            let compiling = std::thread::Builder::new()
                .name("baton-grammar".into())
                .stack_size(COMPILE_STACK_BYTES)
                .spawn_scoped(scope, || self.factory.create_parser(grammar))
                .map_err(|e| e.to_string())?;
            compiling.join().map_err(|_| "the grammar compiler panicked".to_string())?.map_err(|e| e.to_string())
        });
        let parser = compiled.map_err(|message| GrammarError::Refused { kind, message })?;
        Ok(Grammar { parser, vocabulary: self.clone() })
    }
}

/// A compiled grammar: each sequence held to it starts a
/// [`GrammarMatcher`] from it.
#[derive(Clone)]
pub struct Grammar {
    parser: TokenParser,
    vocabulary: Arc<GrammarVocabulary>,
}

impl std::fmt::Debug for Grammar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grammar").field("vocabulary", &self.vocabulary).finish_non_exhaustive()
    }
}

impl Grammar {
    /// A matcher at the start of the text.
    pub fn matcher(&self) -> GrammarMatcher {
        GrammarMatcher { matcher: Matcher::new(Ok(self.parser.deep_clone())), vocabulary: self.vocabulary.clone() }
    }
}

/// One sequence's place in a [`Grammar`].
#[derive(Clone)]
pub struct GrammarMatcher {
    matcher: Matcher,
    vocabulary: Arc<GrammarVocabulary>,
}

impl std::fmt::Debug for GrammarMatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrammarMatcher")
            .field("stopped", &self.matcher.is_stopped())
            .field("error", &self.matcher.get_error())
            .finish()
    }
}

impl GrammarMatcher {
    fn ends_text(&self, token: u32) -> bool {
        self.vocabulary.ends.get(token as usize).copied().unwrap_or(false)
    }

    /// Whether `token` may come next (an end-of-generation token: whether
    /// the text may end here). Leaves the matcher where it was.
    pub fn allows(&mut self, token: u32) -> bool {
        if token as usize >= self.vocabulary.ends.len() || self.matcher.is_stopped() {
            return false;
        }
        if self.ends_text(token) {
            return self.matcher.is_accepting().unwrap_or(false);
        }
        self.matcher.validate_tokens(&[token]).is_ok_and(|n| n == 1)
    }

    /// Sets the logit of every token that may not come next to minus
    /// infinity; returns how many may (tokens already at minus infinity
    /// are not counted). 0 when none may, or the matcher failed
    /// ([`error`](Self::error) says why).
    pub fn mask(&mut self, logits: &mut [f32]) -> usize {
        let Ok(allowed) = self.matcher.compute_mask() else {
            logits.fill(f32::NEG_INFINITY);
            return 0;
        };
        let may_end = allowed.is_allowed(self.vocabulary.eos);
        let mut count = 0;
        for (id, logit) in logits.iter_mut().enumerate() {
            let fits = match self.vocabulary.ends.get(id) {
                Some(true) => may_end,
                Some(false) => allowed.is_allowed(id as u32),
                None => false,
            };
            if !fits {
                *logit = f32::NEG_INFINITY;
            } else if *logit != f32::NEG_INFINITY {
                count += 1;
            }
        }
        count
    }

    /// Takes the token drawn; `false` if it could not continue the text
    /// (the matcher is then unchanged).
    pub fn accept(&mut self, token: u32) -> bool {
        if !self.allows(token) {
            return false;
        }
        let token = if self.ends_text(token) { self.vocabulary.eos } else { token };
        self.matcher.consume_token(token).is_ok()
    }

    /// Whether the text is whole: nothing may follow it (after an
    /// end-of-generation token, or where the grammar admits no more).
    pub fn is_complete(&self) -> bool {
        self.matcher.is_stopped() && self.matcher.get_error().is_none()
    }

    /// Why the matcher failed, if it did.
    pub fn error(&self) -> Option<String> {
        self.matcher.get_error()
    }
}
