//! `gpt-2` / `default` (GPT-2 and HF `ByteLevel(use_regex=True)`), also the
//! second stage of `smollm` (HF's `Digits(individual_digits=True)` first):
//! `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

use super::scan::{char_at, contraction, run_end, whitespace_match};
use crate::unicode::{is_letter, is_number, is_other, is_space};

pub(super) fn gpt2_match(s: &str, i: usize) -> usize {
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

#[cfg(test)]
mod tests {
    use super::super::{words, PreTokenizer};

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
}
