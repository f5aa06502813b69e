//! Character classes of the pre-tokenizer patterns: `\p{L}`, `\p{N}`, `\s`.
//!
//! `\p{L}` (General_Category Letter) is not `char::is_alphabetic` (which also
//! accepts combining marks and letter numbers), so its ranges come from
//! `regex-syntax`'s Unicode tables, turned once into a bitmap for the Basic
//! Multilingual Plane and a sorted range list above it.
//! `\p{N}` is exactly `char::is_numeric` (Nd, Nl, No) and `\s` is exactly
//! `char::is_whitespace` (White_Space), as in Oniguruma's Unicode mode.

use std::sync::OnceLock;

/// Bitmap of the BMP plus ranges beyond it.
struct LetterTable {
    bmp: Vec<u64>,
    astral: Vec<(u32, u32)>,
}

fn letter_table() -> &'static LetterTable {
    static TABLE: OnceLock<LetterTable> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut bmp = vec![0u64; 0x10000 / 64];
        let mut astral = Vec::new();
        for (start, end) in letter_ranges() {
            for cp in start..=end.min(0xFFFF) {
                bmp[(cp / 64) as usize] |= 1u64 << (cp % 64);
            }
            if end > 0xFFFF {
                astral.push((start.max(0x10000), end));
            }
        }
        LetterTable { bmp, astral }
    })
}

/// The ranges of `\p{L}` from regex-syntax's tables. The pattern is a
/// constant, so failing to parse it is a broken build, not bad input; an
/// empty table would then make every letter a symbol, which the unit tests
/// catch.
fn letter_ranges() -> Vec<(u32, u32)> {
    use regex_syntax::hir::{Class, HirKind};
    let Ok(hir) = regex_syntax::Parser::new().parse(r"\p{L}") else {
        return Vec::new();
    };
    match hir.kind() {
        HirKind::Class(Class::Unicode(class)) => {
            class.ranges().iter().map(|r| (r.start() as u32, r.end() as u32)).collect()
        }
        _ => Vec::new(),
    }
}

/// `\p{L}`: Unicode General_Category Letter (Lu, Ll, Lt, Lm, Lo).
pub(crate) fn is_letter(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphabetic();
    }
    let cp = c as u32;
    let table = letter_table();
    if cp <= 0xFFFF {
        return table.bmp[(cp / 64) as usize] & (1u64 << (cp % 64)) != 0;
    }
    table
        .astral
        .binary_search_by(|&(start, end)| {
            if end < cp {
                std::cmp::Ordering::Less
            } else if start > cp {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// `\p{N}`: Unicode General_Category Number (Nd, Nl, No).
pub(crate) fn is_number(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_digit();
    }
    c.is_numeric()
}

/// `\s`: Unicode White_Space.
pub(crate) fn is_space(c: char) -> bool {
    c.is_whitespace()
}

/// Neither `\s`, `\p{L}` nor `\p{N}`: punctuation, symbols, marks, controls.
pub(crate) fn is_other(c: char) -> bool {
    !is_space(c) && !is_letter(c) && !is_number(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_follow_general_category_not_alphabetic() {
        for c in ['a', 'Z', 'é', 'ж', '中', 'ǅ', 'ʰ', '𝐀', '𠀀'] {
            assert!(is_letter(c), "{c:?} is \\p{{L}}");
        }
        // Combining mark with Other_Alphabetic, letter number, digit, emoji.
        for c in ['\u{0345}', 'Ⅻ', '1', '😀', ' ', '_'] {
            assert!(!is_letter(c), "{c:?} is not \\p{{L}}");
        }
    }

    #[test]
    fn numbers_and_spaces_follow_unicode() {
        for c in ['0', '٣', '①', '²', 'Ⅻ'] {
            assert!(is_number(c), "{c:?} is \\p{{N}}");
        }
        for c in [' ', '\t', '\n', '\r', '\u{a0}', '\u{3000}', '\u{85}'] {
            assert!(is_space(c), "{c:?} is \\s");
        }
        assert!(!is_space('\u{200b}'));
        assert!(is_other('!') && is_other('\u{0345}') && !is_other('x'));
    }
}
