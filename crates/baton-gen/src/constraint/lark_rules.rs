//! The Lark text of a call grammar written rule by rule (Gemma 4's and the
//! XML form's): its head (the opening, then one to [`MAX_CALLS`] calls),
//! rules named as they are written, the choice among the tools' calls,
//! and the terminals every such grammar ends with (bounded numbers, the
//! gaps between calls, the leading space before an opening).

use super::grammar::GrammarSource;
use super::json_defaults::MAX_INTEGER_DIGITS;
use super::tool_grammar::MAX_GAP_SPACES;

/// Lark rules written so far, and how many were named.
pub(super) struct LarkRules {
    /// The text.
    pub(super) lark: String,
    named: usize,
    /// What each named rule's name starts with.
    prefix: &'static str,
}

impl LarkRules {
    /// A grammar whose start is `start` (Lark, after `start: `), its rules
    /// named `prefix` and a number.
    pub(super) fn new(prefix: &'static str, start: &str) -> LarkRules {
        LarkRules { lark: format!("%llguidance {{}}\nstart: {start}\n"), named: 0, prefix }
    }

    /// A new rule whose body is `body`; its name.
    pub(super) fn rule(&mut self, body: &str) -> String {
        let name = format!("{}{}", self.prefix, self.named);
        self.named += 1;
        self.lark += &format!("{name}: {body}\n");
        name
    }

    /// The rule `call`: one of `calls` (each a rule's name).
    pub(super) fn choice_of_calls(&mut self, calls: &[String]) {
        self.lark += &format!("call: {}\n", calls.join(" | "));
    }

    /// The grammar, ended with the terminals it shares with the other
    /// call grammars: an integer part of at most [`MAX_INTEGER_DIGITS`]
    /// digits, as JSON schemas' unbounded numbers get (a model cannot
    /// write digits until `max_tokens`), an exponent of at most 3; the gap
    /// between calls; the space before an opening.
    pub(super) fn finish(mut self) -> GrammarSource {
        let digits = MAX_INTEGER_DIGITS - 1;
        self.lark += &format!("INTEGER: /-?(0|[1-9][0-9]{{0,{digits}}})/\n");
        self.lark += &format!("NUMBER: /-?(0|[1-9][0-9]{{0,{digits}}})(\\.[0-9]+)?([eE][+-]?[0-9]{{1,3}})?/\n");
        self.lark += &format!("GAP: /[ \\t\\r\\n]{{1,{MAX_GAP_SPACES}}}/\n");
        self.lark += "LEAD: /[ \\t\\r\\n]+/\n";
        GrammarSource::Lark(self.lark)
    }
}
