//! Finds special tokens written verbatim in text, before pre-tokenization.
//!
//! User-defined tokens are always matched; control and unknown tokens only
//! when the caller asks to parse special tokens (llama.cpp's rule). At each
//! position the longest matching token wins, which is the leftmost-longest
//! match of HF's added-token splitter.

use crate::config::TokenType;

/// A stretch of input: ordinary text, or one special token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fragment<'a> {
    /// Text to pre-tokenize and merge.
    Text(&'a str),
    /// A special token matched verbatim.
    Special(u32),
}

struct Candidate {
    text: Box<str>,
    id: u32,
    always: bool,
}

/// Special tokens indexed by their first byte, longest first.
pub(crate) struct SpecialMatcher {
    by_first_byte: Vec<Vec<Candidate>>,
    any: bool,
}

impl SpecialMatcher {
    pub(crate) fn new(tokens: &[String], types: &[TokenType]) -> Self {
        let mut by_first_byte: Vec<Vec<Candidate>> = (0..256).map(|_| Vec::new()).collect();
        let mut any = false;
        for (id, (text, &kind)) in tokens.iter().zip(types).enumerate() {
            let always = match kind {
                TokenType::UserDefined => true,
                TokenType::Control | TokenType::Unknown => false,
                _ => continue,
            };
            let (Some(&first), Ok(id)) = (text.as_bytes().first(), u32::try_from(id)) else {
                continue;
            };
            any = true;
            by_first_byte[usize::from(first)].push(Candidate { text: text.as_str().into(), id, always });
        }
        for list in &mut by_first_byte {
            // Longest first; among equal lengths the lower id, so the
            // order never depends on anything but the vocabulary.
            list.sort_by(|a, b| b.text.len().cmp(&a.text.len()).then(a.id.cmp(&b.id)));
        }
        Self { by_first_byte, any }
    }

    /// Splits `text` into fragments (`parse_control` also matches control
    /// and unknown tokens), matching no special token of any kind
    /// inside the `literal` byte ranges (sorted, disjoint, within `text`)
    /// nor across their edges; text on both sides of an edge stays one
    /// fragment, so a literal range tokenizes as it would inside the whole
    /// text when it holds no special token's text.
    pub(crate) fn split_around<'a>(
        &self,
        text: &'a str,
        literal: &[std::ops::Range<usize>],
        parse_control: bool,
        out: &mut Vec<Fragment<'a>>,
    ) {
        if !self.any {
            if !text.is_empty() {
                out.push(Fragment::Text(text));
            }
            return;
        }
        let bytes = text.as_bytes();
        let mut literal = literal.iter().peekable();
        let mut start = 0;
        let mut i = 0;
        while i < bytes.len() {
            // Skip literal ranges already passed; jump over the one at `i`.
            while literal.next_if(|range| range.end <= i).is_some() {}
            let next_literal = match literal.peek() {
                Some(range) if range.start <= i => {
                    i = range.end.max(i + 1);
                    continue;
                }
                Some(range) => range.start,
                None => bytes.len(),
            };
            let window = &bytes[i..next_literal];
            let found = self.by_first_byte[usize::from(bytes[i])]
                .iter()
                .find(|c| (c.always || parse_control) && window.starts_with(c.text.as_bytes()));
            match found {
                Some(c) => {
                    if start < i {
                        out.push(Fragment::Text(&text[start..i]));
                    }
                    out.push(Fragment::Special(c.id));
                    i += c.text.len();
                    start = i;
                }
                None => i += 1,
            }
        }
        if start < bytes.len() {
            out.push(Fragment::Text(&text[start..]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_special_wins_and_control_needs_parse_special() {
        let tokens: Vec<String> = ["<|a|>", "<|a|>x", "<u>", "hi"].map(String::from).to_vec();
        let types = [TokenType::Control, TokenType::Control, TokenType::UserDefined, TokenType::Normal];
        let m = SpecialMatcher::new(&tokens, &types);
        let mut out = Vec::new();
        m.split_around("hi<|a|>xy<u>", &[], true, &mut out);
        assert_eq!(out, [Fragment::Text("hi"), Fragment::Special(1), Fragment::Text("y"), Fragment::Special(2)]);
        out.clear();
        m.split_around("hi<|a|>xy<u>", &[], false, &mut out);
        assert_eq!(out, [Fragment::Text("hi<|a|>xy"), Fragment::Special(2)]);
    }

    #[test]
    #[allow(clippy::single_range_in_vec_init)] // a list of one literal range
    fn literal_ranges_match_nothing_and_join_their_neighbours() {
        let tokens: Vec<String> = ["<|a|>", "<u>"].map(String::from).to_vec();
        let types = [TokenType::Control, TokenType::UserDefined];
        let m = SpecialMatcher::new(&tokens, &types);
        let text = "<|a|>say <|a|> and <u>!<|a|>";
        let mut out = Vec::new();
        // "say <|a|> and <u>!" is literal: text, joined with nothing split.
        m.split_around(text, &[5..23], true, &mut out);
        assert_eq!(out, [Fragment::Special(0), Fragment::Text("say <|a|> and <u>!"), Fragment::Special(0)]);
        // A token may not start before a literal range and end inside it.
        out.clear();
        m.split_around("x<|a|>", &[3..6], true, &mut out);
        assert_eq!(out, [Fragment::Text("x<|a|>")]);
        // Template text on both sides of a literal range stays one fragment.
        out.clear();
        m.split_around("ab<u>cd", &[2..5], true, &mut out);
        assert_eq!(out, [Fragment::Text("ab<u>cd")]);
    }
}
