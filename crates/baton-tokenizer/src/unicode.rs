//! Character classes of the pre-tokenizer patterns: `\p{L}`, `\p{M}`, `\p{N}`,
//! `\s`, and o200k's two letter classes `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]` and
//! `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`.
//!
//! General categories are not what `char` offers (`char::is_alphabetic` also
//! accepts combining marks and letter numbers; there is no case category), so
//! their ranges come from `regex-syntax`'s Unicode tables, each class turned
//! once into a bitmap for the Basic Multilingual Plane and a sorted range list
//! above it. `\p{N}` is exactly `char::is_numeric` (Nd, Nl, No) and `\s` is
//! exactly `char::is_whitespace` (White_Space), as in Oniguruma's Unicode mode.

use std::sync::OnceLock;

/// One character class: a bitmap of the BMP plus ranges beyond it.
struct ClassTable {
    bmp: Vec<u64>,
    astral: Vec<(u32, u32)>,
}

impl ClassTable {
    /// The class that `pattern` (a regex-syntax character class) names. The
    /// patterns are constants, so failing to parse one is a broken build, not
    /// bad input; an empty table would then make every such character fall
    /// into another class, which the unit tests catch.
    fn of(pattern: &str) -> Self {
        let mut bmp = vec![0u64; 0x10000 / 64];
        let mut astral = Vec::new();
        for (start, end) in class_ranges(pattern) {
            for cp in start..=end.min(0xFFFF) {
                bmp[(cp / 64) as usize] |= 1u64 << (cp % 64);
            }
            if end > 0xFFFF {
                astral.push((start.max(0x10000), end));
            }
        }
        Self { bmp, astral }
    }

    fn contains(&self, c: char) -> bool {
        let cp = c as u32;
        if cp <= 0xFFFF {
            return self.bmp[(cp / 64) as usize] & (1u64 << (cp % 64)) != 0;
        }
        self.astral
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
}

fn class_ranges(pattern: &str) -> Vec<(u32, u32)> {
    use regex_syntax::hir::{Class, HirKind};
    let Ok(hir) = regex_syntax::Parser::new().parse(pattern) else {
        return Vec::new();
    };
    match hir.kind() {
        HirKind::Class(Class::Unicode(class)) => {
            class.ranges().iter().map(|r| (r.start() as u32, r.end() as u32)).collect()
        }
        _ => Vec::new(),
    }
}

/// Declares a lazily built class table and its membership test.
macro_rules! class {
    ($(#[$doc:meta])* $name:ident, $pattern:literal, ascii: $ascii:expr) => {
        $(#[$doc])*
        pub(crate) fn $name(c: char) -> bool {
            if c.is_ascii() {
                return $ascii(c);
            }
            static TABLE: OnceLock<ClassTable> = OnceLock::new();
            TABLE.get_or_init(|| ClassTable::of($pattern)).contains(c)
        }
    };
}

class!(
    /// `\p{L}`: Unicode General_Category Letter (Lu, Ll, Lt, Lm, Lo).
    is_letter, r"\p{L}", ascii: |c: char| c.is_ascii_alphabetic()
);
class!(
    /// `\p{M}`: Unicode General_Category Mark (Mn, Mc, Me); none is ASCII.
    is_mark, r"\p{M}", ascii: |_| false
);
class!(
    /// `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`: upper- and title-case letters, and
    /// the uncased ones (modifier and other letters, marks).
    is_upper_or_uncased, r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]", ascii: |c: char| c.is_ascii_uppercase()
);
class!(
    /// `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`: lower-case letters, and the uncased ones.
    is_lower_or_uncased, r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]", ascii: |c: char| c.is_ascii_lowercase()
);

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
    fn marks_are_nonspacing_spacing_and_enclosing() {
        // Mn (acute, Devanagari virama), Mc (Devanagari sign aa), Me (enclosing
        // circle), a mark beyond the BMP (Brahmi virama).
        for c in ['\u{301}', '\u{94D}', '\u{93E}', '\u{20DD}', '\u{11046}'] {
            assert!(is_mark(c), "{c:?} is \\p{{M}}");
        }
        for c in ['a', 'é', '\'', '1', '\u{200D}'] {
            assert!(!is_mark(c), "{c:?} is not \\p{{M}}");
        }
    }

    #[test]
    fn o200k_classes_split_letters_by_case_and_share_the_uncased() {
        // Lu, Lt, and a Lu beyond the BMP: upper only.
        for c in ['A', 'É', 'ǅ', '𝐀'] {
            assert!(is_upper_or_uncased(c) && !is_lower_or_uncased(c), "{c:?} is upper");
        }
        // Ll: lower only.
        for c in ['a', 'é', 'ß', '𝐚'] {
            assert!(is_lower_or_uncased(c) && !is_upper_or_uncased(c), "{c:?} is lower");
        }
        // Lm, Lo, M: both.
        for c in ['ʰ', '中', 'あ', '\u{301}', '\u{93E}'] {
            assert!(is_upper_or_uncased(c) && is_lower_or_uncased(c), "{c:?} is uncased");
        }
        for c in ['1', ' ', '\'', 'Ⅻ', '😀'] {
            assert!(!is_upper_or_uncased(c) && !is_lower_or_uncased(c), "{c:?} is no letter");
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
