//! Decoding held to a format: each step, the tokens that cannot continue
//! the text so far are taken out before the sampler draws.
//!
//! A [`Constraint`] keeps the text to a [`Grammar`] (llguidance: a JSON
//! object, a JSON Schema as clients send it, GBNF, a regular expression;
//! see [`grammar`]), or to a tool call (`tools`, read by Baton's own
//! schema reader, [`Schema`]): a token is allowed when its bytes keep the
//! text a prefix of such a text. Under a grammar, end-of-generation tokens
//! are allowed where the grammar may end; under a tool call they are
//! allowed only between calls. The caller ends the generation once the
//! text is complete ([`Constraint::is_complete`]).
//! With `tool_choice: "auto"` the model may also answer in free text: the
//! call is held to its schema only once the text opens with
//! [`TOOL_CALL_OPEN`]; text that does not leaves the constraint
//! [free](Constraint::is_free).
//!
//! A caller draws first and checks the token ([`Constraint::allows`], one
//! short check); only a token that does not fit makes it
//! [`mask`](Constraint::mask) the logits and draw again. A grammar's mask
//! is llguidance's, over the whole vocabulary. A tool call's mask checks
//! the likeliest [`CANDIDATES`] tokens and sets the others aside; only when
//! none of those may follow is the whole vocabulary checked. So the draw is
//! among the likely tokens that fit (the sampler's own top-k, top-p and
//! min-p then apply to them as usual).
//!
//! Tool calls stay on Baton's reader: their formats (free text or a call,
//! several calls between Hermes tags, an end allowed between calls) are
//! state machines around one JSON reader, which the grammar engine has no
//! place for yet.

mod calls;
mod gbnf;
pub mod grammar;
mod json;
mod json_defaults;
mod schema;
mod schema_compile;
mod schema_link;
mod schema_prefix;
mod tags;

use std::sync::Arc;

pub use calls::{MAX_CALLS, MAX_GAP_SPACES};
pub use gbnf::{gbnf_to_lark, GbnfError, MAX_GBNF_BYTES};
pub use grammar::{Grammar, GrammarError, GrammarMatcher, GrammarSource, GrammarVocabulary};
pub use json::{JsonPrefix, MAX_DEPTH};
pub use json_defaults::{
    INTEGER_BOUND, MAX_INDENT as MAX_GRAMMAR_INDENT, MAX_INTEGER_DIGITS as MAX_GRAMMAR_INTEGER_DIGITS,
};
pub use schema::{Schema, SchemaError, MAX_PROPERTIES, MAX_SCHEMA_NESTING};
pub use schema_link::MAX_ALTERNATIVES;
pub use schema_prefix::{SchemaPrefix, MAX_EXPONENT_DIGITS, MAX_INDENT, MAX_INTEGER_DIGITS, MAX_PATHS};
pub use tags::{TOOL_CALL_CLOSE, TOOL_CALL_OPEN};

use baton_tokenizer::Tokenizer;

/// Tokens checked first each step, the likeliest.
pub const CANDIDATES: usize = 256;

#[derive(Clone, Debug)]
enum Reader {
    Schema(SchemaPrefix),
    /// Free text, or a tool call once the text opens with
    /// [`TOOL_CALL_OPEN`] (`matched` of its bytes so far, after leading
    /// whitespace); several calls when `parallel`.
    CallOrText {
        matched: usize,
        call: SchemaPrefix,
        parallel: bool,
    },
    /// One call or more (see [`calls`]).
    Calls(calls::Calls),
    Free,
}

impl Reader {
    /// Takes a token's bytes (empty for a control token).
    fn push_token(&mut self, bytes: &[u8]) -> bool {
        match self {
            Reader::Free => true,
            Reader::Schema(_) if bytes.is_empty() => false,
            Reader::Schema(prefix) => prefix.push_all(bytes),
            Reader::Calls(calls) => calls.push_token(bytes),
            Reader::CallOrText { .. } if bytes.is_empty() => {
                *self = Reader::Free;
                true
            }
            Reader::CallOrText { matched, call, parallel } => {
                let open = TOOL_CALL_OPEN.as_bytes();
                for (i, &b) in bytes.iter().enumerate() {
                    if *matched == 0 && json::is_space(b) {
                        continue;
                    }
                    if b != open[*matched] {
                        *self = Reader::Free;
                        return true;
                    }
                    *matched += 1;
                    if *matched == open.len() {
                        let rest = &bytes[i + 1..];
                        let next = match *parallel {
                            true => Reader::Calls(calls::Calls::within(call.schema().clone(), call.clone())),
                            false => Reader::Schema(call.clone()),
                        };
                        *self = next;
                        return self.push_token_rest(rest);
                    }
                }
                true
            }
        }
    }

    /// Takes the rest of a token's bytes (none: nothing to take).
    fn push_token_rest(&mut self, bytes: &[u8]) -> bool {
        bytes.is_empty() || self.push_token(bytes)
    }
}

/// What holds the text: the grammar engine, or Baton's tool-call reader.
#[derive(Clone, Debug)]
enum Held {
    Grammar(Box<GrammarMatcher>),
    Reader(Reader),
}

/// A text held to a format.
#[derive(Clone, Debug)]
pub struct Constraint {
    held: Held,
}

impl Constraint {
    /// A text `grammar` accepts.
    pub fn grammar(grammar: &Grammar) -> Constraint {
        Constraint { held: Held::Grammar(Box::new(grammar.matcher())) }
    }

    fn reader(reader: Reader) -> Constraint {
        Constraint { held: Held::Reader(reader) }
    }

    /// A JSON text `schema` accepts (a tool call's, see
    /// [`Schema::tool_call`]).
    pub fn schema(schema: Arc<Schema>) -> Constraint {
        Constraint::reader(Reader::Schema(SchemaPrefix::new(schema)))
    }

    /// Free text, or [`TOOL_CALL_OPEN`] then a call `schema` accepts
    /// (see [`Schema::tool_call`]).
    pub fn call_or_text(schema: Arc<Schema>) -> Constraint {
        Constraint::reader(Reader::CallOrText { matched: 0, call: SchemaPrefix::new(schema), parallel: false })
    }

    /// One call or more that `schema` accepts, each after the first opened
    /// by [`TOOL_CALL_CLOSE`] and [`TOOL_CALL_OPEN`] (the text starts
    /// inside the first call's opening tag, as a required call's prompt
    /// ends); see [`MAX_CALLS`].
    pub fn calls(schema: Arc<Schema>) -> Constraint {
        Constraint::reader(Reader::Calls(calls::Calls::new(schema)))
    }

    /// Free text, or [`TOOL_CALL_OPEN`] then one call or more
    /// ([`calls`](Self::calls)).
    pub fn calls_or_text(schema: Arc<Schema>) -> Constraint {
        Constraint::reader(Reader::CallOrText { matched: 0, call: SchemaPrefix::new(schema), parallel: true })
    }

    /// Whether the text is whole (the generation ends here).
    pub fn is_complete(&self) -> bool {
        match &self.held {
            Held::Grammar(matcher) => matcher.is_complete(),
            Held::Reader(Reader::Schema(prefix)) => prefix.is_complete(),
            Held::Reader(Reader::Calls(calls)) => calls.is_complete(),
            Held::Reader(Reader::CallOrText { .. } | Reader::Free) => false,
        }
    }

    /// Whether the text has become free text: every token may follow, and
    /// the generation ends as unconstrained ones do.
    pub fn is_free(&self) -> bool {
        matches!(self.held, Held::Reader(Reader::Free))
    }

    /// Why the grammar engine failed, if it did (a mask of no tokens).
    pub fn error(&self) -> Option<String> {
        match &self.held {
            Held::Grammar(matcher) => matcher.error(),
            Held::Reader(_) => None,
        }
    }

    /// Whether `token` may come next (the constraint is left as it was).
    pub fn allows(&mut self, token: u32, tokenizer: &Tokenizer) -> bool {
        match (&mut self.held, tokenizer.token_bytes(token, false)) {
            (Held::Grammar(matcher), _) => matcher.allows(token),
            (Held::Reader(reader), Ok(bytes)) => reader.clone().push_token(bytes),
            (Held::Reader(_), Err(_)) => false,
        }
    }

    /// Sets the logit of every token that may not come next to minus
    /// infinity; returns how many may (0: none can continue the text).
    /// Tokens already at minus infinity (banned) are not counted.
    pub fn mask(&mut self, logits: &mut [f32], tokenizer: &Tokenizer) -> usize {
        let reader = match &mut self.held {
            Held::Grammar(matcher) => return matcher.mask(logits),
            Held::Reader(reader) => &*reader,
        };
        // The bytes that may come next, tried once: a token whose first
        // byte is not one of them is set aside without reading it whole
        // (after a brace, only a quote or whitespace may follow, and most
        // of the vocabulary goes at this first look).
        let first: [bool; 256] = std::array::from_fn(|b| reader.clone().push_token(&[b as u8]));
        // A token whose logit is minus infinity (banned) never fits.
        let fits = |t: u32| match tokenizer.token_bytes(t, false) {
            _ if logits[t as usize] == f32::NEG_INFINITY => false,
            Ok([]) => reader.clone().push_token(&[]),
            Ok(bytes) => first[bytes[0] as usize] && reader.clone().push_token(bytes),
            Err(_) => false,
        };
        let mut order: Vec<u32> = (0..logits.len() as u32).collect();
        let by_logit = |a: &u32, b: &u32| logits[*b as usize].total_cmp(&logits[*a as usize]);
        let candidates = CANDIDATES.min(order.len());
        if candidates < order.len() {
            order.select_nth_unstable_by(candidates, by_logit);
        }
        let mut allowed: Vec<u32> = order[..candidates].iter().copied().filter(|&t| fits(t)).collect();
        if allowed.is_empty() {
            allowed = order[candidates..].iter().copied().filter(|&t| fits(t)).collect();
        }
        let mut keep = vec![false; logits.len()];
        allowed.iter().for_each(|&t| keep[t as usize] = true);
        logits.iter_mut().zip(&keep).filter(|(_, &k)| !k).for_each(|(l, _)| *l = f32::NEG_INFINITY);
        allowed.len()
    }

    /// Takes the token drawn; `false` if it could not continue the text
    /// (the constraint is then unchanged).
    pub fn accept(&mut self, token: u32, tokenizer: &Tokenizer) -> bool {
        let reader = match &mut self.held {
            Held::Grammar(matcher) => return matcher.accept(token),
            Held::Reader(reader) => reader,
        };
        let Ok(bytes) = tokenizer.token_bytes(token, false) else { return false };
        let mut next = reader.clone();
        let fits = next.push_token(bytes);
        if fits {
            *reader = next;
        }
        fits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_tokenizer::{synthetic_bpe, EncodeOptions};

    #[test]
    fn masked_logits_leave_only_tokens_that_continue_the_object() {
        let tokenizer = Tokenizer::from_config(&synthetic_bpe(512)).expect("tokenizer");
        let object = Arc::new(Schema::compile(&serde_json::json!({"type": "object"})).expect("compiles"));
        let mut constraint = Constraint::schema(object.clone());
        let vocab = tokenizer.vocab_size();
        assert!(vocab > CANDIDATES, "the test covers the candidates and the rest");
        // Distinct logits (7919 is prime to the vocabulary's size): the
        // candidates are the tokens of the CANDIDATES largest.
        let logits: Vec<f32> = (0..vocab).map(|i| ((i * 7919) % vocab) as f32).collect();
        let mut masked = logits.clone();
        let allowed = constraint.mask(&mut masked, &tokenizer);
        let fits = |id: usize| {
            let bytes = tokenizer.token_bytes(id as u32, false).expect("token");
            !bytes.is_empty() && SchemaPrefix::new(object.clone()).push_all(bytes)
        };
        let candidate = |id: usize| logits[id] >= (vocab - CANDIDATES) as f32;
        assert!(allowed > 0, "`{{` or a space can start the text");
        for (id, l) in masked.iter().enumerate() {
            assert_eq!(l.is_finite(), candidate(id) && fits(id), "token {id}");
        }
        // When no candidate fits, the rest are checked: the likeliest
        // tokens made ones that cannot start the text.
        let (misfits, fitting): (Vec<usize>, Vec<usize>) = (0..vocab).partition(|&id| !fits(id));
        assert!(misfits.len() >= CANDIDATES, "enough tokens cannot start an object");
        let mut rest_only = vec![0.0f32; vocab];
        misfits.iter().take(CANDIDATES).for_each(|&id| rest_only[id] = 10.0);
        assert_eq!(constraint.mask(&mut rest_only, &tokenizer), fitting.len());
        for (id, l) in rest_only.iter().enumerate() {
            assert_eq!(l.is_finite(), fits(id), "token {id}");
        }
        // A whole object, token by token, then nothing but the end.
        let text = r#"{"a": [1, 2]}"#;
        for id in tokenizer.encode(text, EncodeOptions::default()).expect("encode") {
            let bytes = tokenizer.token_bytes(id, false).expect("token");
            assert!(
                constraint.allows(id, &tokenizer),
                "{id} {:?} after {constraint:?}",
                String::from_utf8_lossy(bytes)
            );
            assert!(constraint.accept(id, &tokenizer));
        }
        assert!(constraint.is_complete());
        let x = tokenizer.encode("x", EncodeOptions::default()).expect("encode")[0];
        assert!(!constraint.accept(x, &tokenizer), "nothing may follow the object but space");
    }
}

#[cfg(test)]
mod schema_tests;

#[cfg(test)]
mod grammar_tests;
