//! Pre-tokenizers of byte-level BPE models: split text into words before
//! merging, as the regular expressions named by `tokenizer.ggml.pre` do.
//!
//! The patterns are hand-compiled into scanners (no regex engine), one
//! pattern (or family of patterns) per file; each scanner returns the end of
//! the match that the regex engine (leftmost alternative first, greedy, with
//! backtracking) would find at a position. Every pattern here covers every
//! character, so matches are contiguous.
//!
//! - `gpt-2` / `default`, and `smollm` (`gpt2.rs`).
//! - `llama-bpe`, `qwen2` and `qwen35` (`llama3.rs`).
//! - `gpt-4o` (`gpt4o.rs`).

mod gpt2;
mod gpt4o;
mod llama3;
mod scan;

use crate::error::{Result, TokenizerError};
use crate::unicode::is_number;
use llama3::Llama3Shape;
use scan::char_at;

/// Values of `tokenizer.ggml.pre` this crate supports.
pub const SUPPORTED_PRE: &str = "default, gpt-2, gpt-4o, llama-bpe, qwen2, qwen35, smollm";

/// A byte-level BPE pre-tokenizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreTokenizer {
    /// `default` and `gpt-2`: the GPT-2 pattern.
    Gpt2,
    /// `llama-bpe`: the Llama 3 pattern (numbers in groups of up to three).
    Llama3,
    /// `qwen2`: the Llama 3 pattern with single-digit numbers.
    Qwen2,
    /// `qwen35` (Qwen 3.5 and 3.6): the `qwen2` pattern with combining marks
    /// counted as letters.
    Qwen35,
    /// `gpt-4o` (o200k, gpt-oss): words split at lower-to-upper case changes,
    /// contractions kept on their word, numbers in groups of up to three.
    Gpt4o,
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
            "qwen35" => Ok(Self::Qwen35),
            "gpt-4o" => Ok(Self::Gpt4o),
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
            Self::Gpt2 => split_with(text, words, gpt2::gpt2_match),
            Self::Llama3 => split_with(text, words, |s, i| llama3::llama3_match(s, i, Llama3Shape::LLAMA3)),
            Self::Qwen2 => split_with(text, words, |s, i| llama3::llama3_match(s, i, Llama3Shape::QWEN2)),
            Self::Qwen35 => split_with(text, words, |s, i| llama3::llama3_match(s, i, Llama3Shape::QWEN35)),
            Self::Gpt4o => split_with(text, words, gpt4o::gpt4o_match),
            Self::SmolLm => {
                let mut start = 0;
                for (i, c) in text.char_indices() {
                    if is_number(c) {
                        split_with(&text[start..i], words, gpt2::gpt2_match);
                        let end = i + c.len_utf8();
                        words.push(&text[i..end]);
                        start = end;
                    }
                }
                split_with(&text[start..], words, gpt2::gpt2_match);
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

/// The words of `text` under `pre`, checked to cover it (for unit tests).
#[cfg(test)]
fn words(pre: PreTokenizer, text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    pre.split(text, &mut out);
    assert_eq!(out.concat(), text, "{pre:?}: words must cover the text");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gguf_names_map_to_their_pre_tokenizers() {
        for (name, pre) in [
            ("default", PreTokenizer::Gpt2),
            ("gpt-2", PreTokenizer::Gpt2),
            ("gpt-4o", PreTokenizer::Gpt4o),
            ("llama-bpe", PreTokenizer::Llama3),
            ("qwen2", PreTokenizer::Qwen2),
            ("qwen35", PreTokenizer::Qwen35),
            ("smollm", PreTokenizer::SmolLm),
        ] {
            assert_eq!(PreTokenizer::from_gguf_name(Some(name)).ok(), Some(pre), "{name}");
            assert!(SUPPORTED_PRE.split(", ").any(|listed| listed == name), "{name} is not in SUPPORTED_PRE");
        }
        assert_eq!(PreTokenizer::from_gguf_name(None).ok(), Some(PreTokenizer::Gpt2));
    }

    #[test]
    fn unknown_pre_is_an_error_listing_the_supported_ones() {
        let err = PreTokenizer::from_gguf_name(Some("falcon")).unwrap_err();
        assert!(err.to_string().contains("smollm") && err.to_string().contains("qwen35"), "{err}");
    }

    #[test]
    fn readme_lists_the_supported_pre_tokenizers() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
        let readme = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
        assert!(
            readme.contains(&format!("`tokenizer.ggml.pre`: {SUPPORTED_PRE}")),
            "README.md should list `tokenizer.ggml.pre`: {SUPPORTED_PRE}"
        );
    }
}
