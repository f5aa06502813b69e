//! Decoding held to a format: each step, the tokens that cannot continue
//! the text so far are taken out before the sampler draws.
//!
//! A [`Constraint`] keeps the text to a [`Grammar`] (llguidance: a JSON
//! object, a JSON Schema as clients send it, GBNF, a regular expression,
//! tool calls; see [`grammar`] and [`tool_call_grammar`]): a token is
//! allowed when its bytes keep the text a prefix of such a text, and an
//! end-of-generation token where the grammar may end. The caller ends the
//! generation once the text is complete ([`Constraint::is_complete`]).
//! With `tool_choice: "auto"` the model may also answer in free text
//! ([`Constraint::call_or_text`]): the text is held to the calls' grammar
//! only while it may still open with [`TOOL_CALL_OPEN`] (or the opening
//! of another format's calls, [`Constraint::call_or_text_opened_by`]);
//! text that does not leaves the constraint [free](Constraint::is_free).
//!
//! A caller draws first and checks the token ([`Constraint::allows`], one
//! short check); only a token that does not fit makes it
//! [`mask`](Constraint::mask) the logits (llguidance's mask, over the
//! whole vocabulary) and draw again.

mod gbnf;
mod gemma4_grammar;
mod gemma4_values;
pub mod grammar;
mod json_defaults;
mod lark_rules;
mod tags;
mod tool_grammar;
mod triggered;
mod xml_grammar;
mod xml_values;

pub use gbnf::{gbnf_to_lark, GbnfError, MAX_GBNF_BYTES};
pub use gemma4_grammar::gemma4_call_grammar;
pub use gemma4_values::{gemma4_call, gemma4_value, read_gemma4_calls, read_gemma4_value};
pub use grammar::{Grammar, GrammarError, GrammarMatcher, GrammarSource, GrammarVocabulary};
pub use json_defaults::{
    INTEGER_BOUND, MAX_INDENT as MAX_GRAMMAR_INDENT, MAX_INTEGER_DIGITS as MAX_GRAMMAR_INTEGER_DIGITS,
};
pub use tags::{
    GEMMA4_CALL_CLOSE, GEMMA4_CALL_NAME, GEMMA4_CALL_OPEN, GEMMA4_QUOTE, HARMONY_CALL_CHANNEL, HARMONY_CALL_END,
    HARMONY_CALL_TRIGGERS, HARMONY_CONSTRAIN_JSON, HARMONY_MESSAGE, HARMONY_RECIPIENT, TOOL_CALL_CLOSE, TOOL_CALL_OPEN,
    XML_FUNCTION_CLOSE, XML_FUNCTION_OPEN, XML_PARAMETER_CLOSE, XML_PARAMETER_OPEN,
};
pub use tool_grammar::{
    harmony_call_grammar, harmony_lazy_call_grammar, tool_call_grammar, CallShape, MAX_CALLS, MAX_GAP_SPACES,
};
pub use xml_grammar::xml_call_grammar;
pub use xml_values::{read_xml_call, read_xml_value, xml_call};

use baton_tokenizer::Tokenizer;
use triggered::{Step, Triggered};

/// Where a text that may open a call stands after some bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opening {
    /// Still whitespace or a start of [`TOOL_CALL_OPEN`] (this many of its
    /// bytes matched), or the tag whole (the call's grammar goes on).
    Within(usize),
    /// Not a call: free text.
    Words,
}

/// `matched` bytes of the call's opening tag `open` (after leading
/// whitespace), then `bytes` (empty, a control token's: the answer ends in
/// words).
fn opening(open: &str, matched: usize, bytes: &[u8]) -> Opening {
    let open = open.as_bytes();
    if bytes.is_empty() {
        return Opening::Words;
    }
    let mut matched = matched;
    for &b in bytes {
        if matched == open.len() {
            break;
        }
        if matched == 0 && matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            continue;
        }
        if b != open[matched] {
            return Opening::Words;
        }
        matched += 1;
    }
    Opening::Within(matched)
}

/// What holds the text.
#[derive(Clone, Debug)]
enum Held {
    Grammar(Box<GrammarMatcher>),
    /// Free text, or a call: while the text is whitespace and a start of
    /// the opening tag `open` (`matched` of its bytes), the calls' grammar
    /// (which opens with the tag) reads it too.
    CallOrText {
        open: &'static str,
        matched: usize,
        call: Box<GrammarMatcher>,
    },
    /// Free text until a trigger appears in it, then the grammar.
    Triggered(Box<Triggered>),
    /// Free text: any token.
    Free,
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

    /// Free text, or the calls `calls` accepts: a grammar of
    /// [`tool_call_grammar`] whose [`CallShape::opens`] is set.
    pub fn call_or_text(calls: &Grammar) -> Constraint {
        Constraint::call_or_text_opened_by(calls, TOOL_CALL_OPEN)
    }

    /// Free text, or the calls `calls` accepts, which open with `open`
    /// after any whitespace (as [`gemma4_call_grammar`]'s with
    /// [`CallShape::opens`] open with [`GEMMA4_CALL_OPEN`]).
    pub fn call_or_text_opened_by(calls: &Grammar, open: &'static str) -> Constraint {
        Constraint { held: Held::CallOrText { open, matched: 0, call: Box::new(calls.matcher()) } }
    }

    /// Free text in which `grammar` holds a call from the moment one of
    /// `triggers` appears on (a lazy grammar, as llama.cpp's grammar
    /// triggers make one); the grammar's texts start with a trigger.
    pub fn triggered(grammar: &Grammar, triggers: &'static [&'static str]) -> Constraint {
        Constraint { held: Held::Triggered(Box::new(Triggered::new(grammar, triggers))) }
    }

    /// Whether the text is whole (the generation ends here).
    pub fn is_complete(&self) -> bool {
        match &self.held {
            Held::Grammar(matcher) => matcher.is_complete(),
            Held::CallOrText { .. } | Held::Triggered(_) | Held::Free => false,
        }
    }

    /// Whether the text has become free text: every token may follow, and
    /// the generation ends as unconstrained ones do.
    pub fn is_free(&self) -> bool {
        matches!(self.held, Held::Free)
    }

    /// Why the grammar engine failed, if it did (a mask of no tokens).
    pub fn error(&self) -> Option<String> {
        match &self.held {
            Held::Grammar(matcher) | Held::CallOrText { call: matcher, .. } => matcher.error(),
            Held::Triggered(_) | Held::Free => None,
        }
    }

    /// Whether `token` may come next (the constraint is left as it was).
    pub fn allows(&mut self, token: u32, tokenizer: &Tokenizer) -> bool {
        match &mut self.held {
            Held::Grammar(matcher) => matcher.allows(token),
            Held::CallOrText { open, matched, call } => match tokenizer.token_bytes(token, false) {
                Ok(bytes) => opening(open, *matched, bytes) == Opening::Words || call.allows(token),
                Err(_) => false,
            },
            Held::Triggered(watched) => !matches!(watched.step(token, tokenizer), Step::Refused),
            Held::Free => true,
        }
    }

    /// Sets the logit of every token that may not come next to minus
    /// infinity; returns how many may (0: none can continue the text).
    /// Tokens already at minus infinity (banned) are not counted.
    pub fn mask(&mut self, logits: &mut [f32], tokenizer: &Tokenizer) -> usize {
        match &mut self.held {
            Held::Grammar(matcher) => matcher.mask(logits),
            Held::CallOrText { open, matched, call } => {
                // The call's tokens, and every token that turns the text
                // to words.
                let before = logits.to_vec();
                call.mask(logits);
                let mut count = 0;
                for (id, (logit, &was)) in logits.iter_mut().zip(&before).enumerate() {
                    let words = || {
                        tokenizer
                            .token_bytes(id as u32, false)
                            .is_ok_and(|b| opening(open, *matched, b) == Opening::Words)
                    };
                    if *logit == f32::NEG_INFINITY && was != f32::NEG_INFINITY && words() {
                        *logit = was;
                    }
                    count += usize::from(*logit != f32::NEG_INFINITY);
                }
                count
            }
            Held::Triggered(watched) => watched.mask(logits, tokenizer),
            Held::Free => logits.iter().filter(|l| **l != f32::NEG_INFINITY).count(),
        }
    }

    /// Takes the token drawn; `false` if it could not continue the text
    /// (the constraint is then unchanged).
    pub fn accept(&mut self, token: u32, tokenizer: &Tokenizer) -> bool {
        let (open, matched, call) = match &mut self.held {
            Held::Grammar(matcher) => return matcher.accept(token),
            Held::CallOrText { open, matched, call } => (*open, matched, call),
            Held::Triggered(watched) => {
                match watched.step(token, tokenizer) {
                    Step::Free(tail) => watched.keep(tail),
                    Step::Held(matcher) => self.held = Held::Grammar(matcher),
                    Step::Refused => return false,
                }
                return true;
            }
            Held::Free => return true,
        };
        let Ok(bytes) = tokenizer.token_bytes(token, false) else { return false };
        match opening(open, *matched, bytes) {
            Opening::Words => self.held = Held::Free,
            Opening::Within(now) => {
                if !call.accept(token) {
                    return false;
                }
                *matched = now;
                if now == open.len() {
                    // The tag is whole: the call's grammar holds the rest.
                    if let Held::CallOrText { call, .. } = std::mem::replace(&mut self.held, Held::Free) {
                        self.held = Held::Grammar(call);
                    }
                }
            }
        }
        true
    }
}

#[cfg(test)]
mod grammar_tests;

#[cfg(test)]
mod tool_grammar_tests;

#[cfg(test)]
mod gemma4_grammar_tests;

#[cfg(test)]
mod xml_grammar_tests;
