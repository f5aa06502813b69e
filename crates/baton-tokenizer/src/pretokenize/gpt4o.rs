//! `gpt-4o` (OpenAI's o200k, used by gpt-oss), whose alternatives are:
//!
//! 1. `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
//! 2. `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
//! 3. `\p{N}{1,3}`
//! 4. ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
//! 5. `\s*[\r\n]+`
//! 6. `\s+(?!\S)`
//! 7. `\s+`
//!
//! A word is upper-or-uncased letters then lower-or-uncased ones ("Hello",
//! "HTML", "日本語"), so a word breaks where a lower-case letter meets an
//! upper-case one ("camelCase" is "camel" and "Case"), and a contraction stays
//! on its word.

use super::scan::{char_at, contraction_end, line_break_match, run_end};
use crate::unicode::{is_letter, is_lower_or_uncased, is_number, is_other, is_upper_or_uncased};

pub(super) fn gpt4o_match(s: &str, i: usize) -> usize {
    let Some(c) = char_at(s, i) else {
        return s.len();
    };
    // 1 and 2, each with the optional prefix character first, then without.
    // Only a mark can both be the prefix and begin a word itself.
    let after_prefix = (c != '\r' && c != '\n' && !is_letter(c) && !is_number(c)).then(|| i + c.len_utf8());
    let starts = [after_prefix, Some(i)];
    for word in [lower_tail_word, upper_word] {
        if let Some(end) = starts.iter().flatten().find_map(|&start| word(s, start)) {
            return contraction_end(s, end).unwrap_or(end);
        }
    }
    // 3: `\p{N}{1,3}`
    if is_number(c) {
        return run_end(s, i, 3, is_number);
    }
    // 4: ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
    let next = char_at(s, i + c.len_utf8());
    let start = if c == ' ' && next.is_some_and(is_other) { i + 1 } else { i };
    if char_at(s, start).is_some_and(is_other) {
        let end = run_end(s, start, usize::MAX, is_other);
        return run_end(s, end, usize::MAX, |c| matches!(c, '\r' | '\n' | '/'));
    }
    // 5, 6, 7
    line_break_match(s, i)
}

/// End of `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+` at
/// `start`, if it matches there.
///
/// The greedy upper run stops at `k`. A lower-case letter at `k` starts the
/// lower run, which takes all it can. Otherwise the upper run gives back
/// characters until the last one that is also lower-or-uncased, which is the
/// whole lower run (the characters after it are upper-case only).
fn lower_tail_word(s: &str, start: usize) -> Option<usize> {
    let k = run_end(s, start, usize::MAX, is_upper_or_uncased);
    if char_at(s, k).is_some_and(is_lower_or_uncased) {
        return Some(run_end(s, k, usize::MAX, is_lower_or_uncased));
    }
    s[start..k].char_indices().rev().find(|&(_, c)| is_lower_or_uncased(c)).map(|(j, c)| start + j + c.len_utf8())
}

/// End of `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*` at
/// `start`, if it matches there.
fn upper_word(s: &str, start: usize) -> Option<usize> {
    let k = run_end(s, start, usize::MAX, is_upper_or_uncased);
    (k > start).then(|| run_end(s, k, usize::MAX, is_lower_or_uncased))
}

#[cfg(test)]
mod tests {
    use super::super::{words, PreTokenizer};

    fn gpt4o(text: &str) -> Vec<&str> {
        words(PreTokenizer::Gpt4o, text)
    }

    #[test]
    fn words_break_where_lower_case_meets_upper_case() {
        assert_eq!(gpt4o("Hello camelCase HTMLParser ABC"), ["Hello", " camel", "Case", " HTMLParser", " ABC"]);
        assert_eq!(gpt4o("iPhone eBay McDONALD"), ["i", "Phone", " e", "Bay", " Mc", "DONALD"]);
        // Title case (Lt) and modifier letters (Lm) begin words like capitals.
        assert_eq!(gpt4o("ǅemal ʰa"), ["ǅemal", " ʰa"]);
    }

    #[test]
    fn contractions_stay_on_their_word_in_any_case() {
        assert_eq!(gpt4o("I'm don't WE'LL It'S you'Re"), ["I'm", " don't", " WE'LL", " It'S", " you'Re"]);
        // Not a contraction: the apostrophe starts the next word.
        assert_eq!(gpt4o("rock'n'roll"), ["rock", "'n", "'roll"]);
        // Case folding: long s is `s`; a contraction is taken once.
        assert_eq!(gpt4o("it'\u{17F} x's's"), ["it'\u{17F}", " x's", "'s"]);
        // An apostrophe at a word's start is its prefix, unless a space is.
        assert_eq!(gpt4o("'s 'Tis"), ["'s", " '", "Tis"]);
    }

    #[test]
    fn numbers_go_in_threes_and_never_take_a_prefix() {
        assert_eq!(gpt4o("1234567 x12 $5"), ["123", "456", "7", " x", "12", " $", "5"]);
        assert_eq!(gpt4o("٣٤٥٦ ①②"), ["٣٤٥", "٦", " ", "①②"]);
    }

    #[test]
    fn cjk_and_combining_marks_join_the_letters_around_them() {
        assert_eq!(gpt4o("日本語のテキスト、中文。"), ["日本語のテキスト", "、中文", "。"]);
        // Decomposed accents, Devanagari vowel signs. A mark is uncased: in
        // an all-capital run the word ends after the last mark, the last
        // character the lower-case part can take.
        let hindi = "\u{928}\u{92E}\u{938}\u{94D}\u{924}\u{947}";
        assert_eq!(
            gpt4o(&format!("cafe\u{301} E\u{301}COLE {hindi}")),
            ["cafe\u{301}".to_owned(), " E\u{301}".to_owned(), "COLE".to_owned(), format!(" {hindi}")]
        );
        // A mark after a symbol begins the word; a lone mark is a word.
        assert_eq!(gpt4o("!\u{301}a \u{301}"), ["!\u{301}a", " \u{301}"]);
    }

    #[test]
    fn symbols_keep_following_line_breaks_and_slashes() {
        assert_eq!(gpt4o("a+b //c\n/d"), ["a", "+b", " //", "c", "\n", "/d"]);
        assert_eq!(gpt4o("x;\r\n/\r\ny"), ["x", ";\r\n/\r\n", "y"]);
        assert_eq!(gpt4o("<|x|>"), ["<|", "x", "|>"]);
    }

    #[test]
    fn whitespace_runs_end_at_line_breaks_and_leave_a_space_for_the_word() {
        assert_eq!(gpt4o("a  \r\n\r\n  b"), ["a", "  \r\n\r\n", " ", " b"]);
        assert_eq!(gpt4o("a\tb   "), ["a", "\tb", "   "]);
        assert_eq!(gpt4o("a \u{3000}b\n"), ["a", " ", "\u{3000}b", "\n"]);
        assert_eq!(gpt4o("  12"), [" ", " ", "12"]);
    }
}
