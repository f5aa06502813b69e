//! Pre-tokenizers of byte-level BPE models: split text into words before
//! merging, as the regular expressions named by `tokenizer.ggml.pre` do.
//!
//! The patterns are hand-compiled into scanners (no regex engine); each
//! scanner returns the end of the match that the regex engine (leftmost
//! alternative first, greedy, with backtracking) would find at a position.
//! Every pattern here covers every character, so matches are contiguous.
//!
//! - `gpt-2` / `default` (GPT-2 and HF `ByteLevel(use_regex=True)`):
//!   `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
//! - `llama-bpe` (Llama 3):
//!   `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//!   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
//! - `qwen2`: as `llama-bpe` with `\p{N}` (single digits).
//! - `smollm` (SmolLM, SmolLM2): HF's `Digits(individual_digits=True)` (every
//!   `\p{N}` character is its own word) and then the GPT-2 pattern on each
//!   remaining stretch.

use crate::error::{Result, TokenizerError};
use crate::unicode::{is_letter, is_number, is_other, is_space};

/// Values of `tokenizer.ggml.pre` this crate supports.
pub const SUPPORTED_PRE: &str = "default, gpt-2, llama-bpe, qwen2, smollm";

/// A byte-level BPE pre-tokenizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreTokenizer {
    /// `default` and `gpt-2`: the GPT-2 pattern.
    Gpt2,
    /// `llama-bpe`: the Llama 3 pattern (numbers in groups of up to three).
    Llama3,
    /// `qwen2`: the Llama 3 pattern with single-digit numbers.
    Qwen2,
    /// `smollm`: individual digits, then the GPT-2 pattern.
    SmolLm,
}

impl PreTokenizer {
    /// Parses `tokenizer.ggml.pre`; absent means `default`.
    pub fn from_gguf_name(pre: Option<&str>) -> Result<Self> {
        match pre.unwrap_or("default") {
            "default" | "gpt-2" => Ok(Self::Gpt2),
            "llama-bpe" => Ok(Self::Llama3),
            "qwen2" => Ok(Self::Qwen2),
            "smollm" => Ok(Self::SmolLm),
            other => Err(TokenizerError::UnknownPre { pre: other.to_owned(), supported: SUPPORTED_PRE }),
        }
    }

    /// Whether a word that is itself a vocabulary token skips merging
    /// (HF's `ignore_merges`, set by Llama 3's tokenizer).
    pub(crate) fn ignores_merges(self) -> bool {
        matches!(self, Self::Llama3)
    }

    /// Appends the words of `text` to `words`, in order; they concatenate
    /// back to `text`.
    pub fn split<'a>(self, text: &'a str, words: &mut Vec<&'a str>) {
        match self {
            Self::Gpt2 => split_with(text, words, gpt2_match),
            Self::Llama3 => split_with(text, words, |s, i| llama3_match(s, i, 3)),
            Self::Qwen2 => split_with(text, words, |s, i| llama3_match(s, i, 1)),
            Self::SmolLm => {
                let mut start = 0;
                for (i, c) in text.char_indices() {
                    if is_number(c) {
                        split_with(&text[start..i], words, gpt2_match);
                        let end = i + c.len_utf8();
                        words.push(&text[i..end]);
                        start = end;
                    }
                }
                split_with(&text[start..], words, gpt2_match);
            }
        }
    }
}

fn split_with<'a>(text: &'a str, words: &mut Vec<&'a str>, matcher: impl Fn(&str, usize) -> usize) {
    let mut i = 0;
    while i < text.len() {
        let end = matcher(text, i);
        // Every matcher consumes at least one character; guard anyway so a
        // bug can never loop forever.
        let end = if end > i { end } else { i + char_at(text, i).map_or(1, char::len_utf8) };
        words.push(&text[i..end]);
        i = end;
    }
}

fn char_at(s: &str, i: usize) -> Option<char> {
    s.get(i..).and_then(|rest| rest.chars().next())
}

/// End of the run of characters from `i` that satisfy `pred` (at most `max`).
fn run_end(s: &str, i: usize, max: usize, pred: impl Fn(char) -> bool) -> usize {
    let mut end = i;
    for (count, c) in s[i..].chars().enumerate() {
        if count == max || !pred(c) {
            break;
        }
        end += c.len_utf8();
    }
    end
}

/// Length of the contraction suffix (`s t re ve m ll d`) after an apostrophe.
fn contraction(s: &str, i: usize, ignore_case: bool) -> Option<usize> {
    let rest = s.get(i..)?.as_bytes();
    // Unicode case folding maps U+017F (long s) to `s`.
    if ignore_case && rest.starts_with("\u{17F}".as_bytes()) {
        return Some(2);
    }
    let lower = |k: usize| rest.get(k).map(|&b| if ignore_case { b.to_ascii_lowercase() } else { b });
    match (lower(0)?, lower(1)) {
        (b's' | b't' | b'm' | b'd', _) => Some(1),
        (b'r', Some(b'e')) | (b'v', Some(b'e')) | (b'l', Some(b'l')) => Some(2),
        _ => None,
    }
}

/// `\s+(?!\S)|\s+` at `i`, where `i` starts a whitespace run.
fn whitespace_match(s: &str, i: usize) -> usize {
    let end = run_end(s, i, usize::MAX, is_space);
    if end == s.len() {
        return end;
    }
    // Followed by a non-space: the lookahead gives back the last space,
    // unless that would leave nothing (then plain `\s+` takes the run).
    let last_start = s[i..end].char_indices().last().map_or(i, |(k, _)| i + k);
    if last_start > i {
        last_start
    } else {
        end
    }
}

fn gpt2_match(s: &str, i: usize) -> usize {
    let Some(c) = char_at(s, i) else {
        return s.len();
    };
    if c == '\'' {
        if let Some(len) = contraction(s, i + 1, false) {
            return i + 1 + len;
        }
    }
    // ` ?X+` for the three classes: the optional space is U+0020 only.
    let (start, first) = match (c, char_at(s, i + 1)) {
        (' ', Some(next)) if !is_space(next) => (i + 1, next),
        _ => (i, c),
    };
    if is_letter(first) {
        return run_end(s, start, usize::MAX, is_letter);
    }
    if is_number(first) {
        return run_end(s, start, usize::MAX, is_number);
    }
    if is_other(first) {
        return run_end(s, start, usize::MAX, is_other);
    }
    whitespace_match(s, i)
}

fn llama3_match(s: &str, i: usize, max_digits: usize) -> usize {
    let Some(c) = char_at(s, i) else {
        return s.len();
    };
    if c == '\'' {
        if let Some(len) = contraction(s, i + 1, true) {
            return i + 1 + len;
        }
    }
    // `[^\r\n\p{L}\p{N}]?\p{L}+`
    if is_letter(c) {
        return run_end(s, i, usize::MAX, is_letter);
    }
    let next = char_at(s, i + c.len_utf8());
    if c != '\r' && c != '\n' && !is_number(c) && next.is_some_and(is_letter) {
        return run_end(s, i + c.len_utf8(), usize::MAX, is_letter);
    }
    // `\p{N}{1,max}`
    if is_number(c) {
        return run_end(s, i, max_digits, is_number);
    }
    // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
    let start = if c == ' ' && next.is_some_and(is_other) { i + 1 } else { i };
    if char_at(s, start).is_some_and(is_other) {
        let end = run_end(s, start, usize::MAX, is_other);
        return run_end(s, end, usize::MAX, |c| c == '\r' || c == '\n');
    }
    // `\s*[\r\n]+`: up to and including the last line break of the run.
    let end = run_end(s, i, usize::MAX, is_space);
    if let Some(k) = s[i..end].rfind(['\r', '\n']) {
        return i + k + 1;
    }
    whitespace_match(s, i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(pre: PreTokenizer, text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        pre.split(text, &mut out);
        assert_eq!(out.concat(), text, "words must cover the text");
        out
    }

    #[test]
    fn gpt2_splits_words_numbers_punctuation_and_space_runs() {
        assert_eq!(
            words(PreTokenizer::Gpt2, "Hello world, it's 2024!!  ok \n\n x"),
            ["Hello", " world", ",", " it", "'s", " 2024", "!!", " ", " ok", " \n\n", " x"]
        );
        assert_eq!(words(PreTokenizer::Gpt2, "a  "), ["a", "  "]);
        assert_eq!(words(PreTokenizer::Gpt2, "I'VE"), ["I", "'", "VE"]);
    }

    #[test]
    fn smollm_isolates_every_digit_before_the_gpt2_pattern() {
        assert_eq!(words(PreTokenizer::SmolLm, "a  12 b٣"), ["a", "  ", "1", "2", " b", "٣"]);
    }

    #[test]
    fn llama3_groups_digits_by_three_and_keeps_newlines_apart() {
        assert_eq!(
            words(PreTokenizer::Llama3, "I'VE 1234567 x\n\n  y\tz ..\n"),
            ["I", "'VE", " ", "123", "456", "7", " x", "\n\n", " ", " y", "\tz", " ..\n"]
        );
        assert_eq!(words(PreTokenizer::Qwen2, "x 12"), ["x", " ", "1", "2"]);
        assert_eq!(words(PreTokenizer::Llama3, "x'\u{17F} x'K"), ["x", "'\u{17F}", " x", "'K"]);
    }

    #[test]
    fn unknown_pre_is_an_error_listing_the_supported_ones() {
        let err = PreTokenizer::from_gguf_name(Some("falcon")).unwrap_err();
        assert!(err.to_string().contains("smollm"), "{err}");
    }
}
