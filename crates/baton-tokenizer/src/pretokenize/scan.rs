//! The scanning steps the patterns share: a character at a byte offset,
//! runs of a class, contractions and whitespace runs (each returns the end
//! of its match, as the regex engine would find it).

use crate::unicode::is_space;

pub(super) fn char_at(s: &str, i: usize) -> Option<char> {
    s.get(i..).and_then(|rest| rest.chars().next())
}

/// End of the run of characters from `i` that satisfy `pred` (at most `max`).
pub(super) fn run_end(s: &str, i: usize, max: usize, pred: impl Fn(char) -> bool) -> usize {
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
pub(super) fn contraction(s: &str, i: usize, ignore_case: bool) -> Option<usize> {
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

/// End of `(?i:'s|'t|'re|'ve|'m|'ll|'d)` at `i`, if it matches there.
pub(super) fn contraction_end(s: &str, i: usize) -> Option<usize> {
    if char_at(s, i) != Some('\'') {
        return None;
    }
    contraction(s, i + 1, true).map(|len| i + 1 + len)
}

/// `\s*[\r\n]+|\s+(?!\S)|\s+` at `i`, where `i` starts a whitespace run: up
/// to and including the run's last line break, else [`whitespace_match`].
pub(super) fn line_break_match(s: &str, i: usize) -> usize {
    let end = run_end(s, i, usize::MAX, is_space);
    if let Some(k) = s[i..end].rfind(['\r', '\n']) {
        return i + k + 1;
    }
    whitespace_match(s, i)
}

/// `\s+(?!\S)|\s+` at `i`, where `i` starts a whitespace run.
pub(super) fn whitespace_match(s: &str, i: usize) -> usize {
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
