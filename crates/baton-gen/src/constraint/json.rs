//! A JSON text (RFC 8259) read one byte at a time: whether the bytes so far
//! can still begin a valid text, and whether they already are one.

/// A container the reader is inside.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Frame {
    Object,
    Array,
}

/// What the next byte may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// A value (or, `first`, the closing bracket of an empty array).
    Value { first_in_array: bool },
    /// A key (or, `first`, the closing brace of an empty object).
    Key { first: bool },
    /// The colon after a key.
    Colon,
    /// After a value inside a container: a comma or the closing bracket.
    AfterValue,
    /// Inside a string (a key when `key`); `escape`: after a backslash;
    /// `hex`: hex digits of a `\u` escape still to come.
    Str { key: bool, escape: bool, hex: u8 },
    /// Inside a number, at `part`.
    Number(Num),
    /// Inside `true`, `false` or `null`: the rest of its letters.
    Literal { rest: &'static [u8] },
    /// The top-level value is complete: only whitespace may follow.
    Done,
}

/// Where a number is: after `-`, after a leading `0`, in the integer
/// digits, after `.`, in the fraction, after `e`, after the exponent's
/// sign, in the exponent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Num {
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    E,
    ESign,
    Exp,
}

impl Num {
    /// Whether the number may end here.
    pub(super) fn can_end(self) -> bool {
        matches!(self, Num::Zero | Num::Int | Num::Frac | Num::Exp)
    }

    /// The state after `b`, or `None` when `b` does not continue the number.
    pub(super) fn next(self, b: u8) -> Option<Num> {
        let digit = b.is_ascii_digit();
        Some(match (self, b) {
            (Num::Minus, b'0') => Num::Zero,
            (Num::Minus, _) if digit => Num::Int,
            (Num::Int, _) if digit => Num::Int,
            (Num::Zero | Num::Int, b'.') => Num::Dot,
            (Num::Zero | Num::Int | Num::Frac, b'e' | b'E') => Num::E,
            (Num::Dot | Num::Frac, _) if digit => Num::Frac,
            (Num::E, b'+' | b'-') => Num::ESign,
            (Num::E | Num::ESign | Num::Exp, _) if digit => Num::Exp,
            _ => return None,
        })
    }
}

pub(super) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// The bytes of a JSON text so far, as far as they decide it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonPrefix {
    stack: Vec<Frame>,
    state: State,
    /// Only an object may be the top-level value.
    object_only: bool,
}

/// Most containers one inside another (deeper texts are refused, so the
/// stack stays small).
pub const MAX_DEPTH: usize = 64;

impl JsonPrefix {
    /// The start of a JSON text whose top-level value is an object
    /// (`response_format: {"type": "json_object"}`).
    pub fn object() -> JsonPrefix {
        JsonPrefix { stack: Vec::new(), state: State::Value { first_in_array: false }, object_only: true }
    }

    /// Whether the bytes so far are a whole JSON text.
    pub fn is_complete(&self) -> bool {
        match self.state {
            State::Done => true,
            // A top-level number ends with the text.
            State::Number(num) => self.stack.is_empty() && num.can_end(),
            _ => false,
        }
    }

    /// Takes `bytes`; `false` (and the prefix unchanged only in part) when
    /// they cannot continue a valid text.
    pub fn push_all(&mut self, bytes: &[u8]) -> bool {
        bytes.iter().all(|&b| self.push(b))
    }

    /// Takes one byte; `false` when it cannot continue a valid text.
    pub fn push(&mut self, b: u8) -> bool {
        match self.state {
            State::Str { key, escape, hex } => return self.string(key, escape, hex, b),
            State::Literal { rest } => {
                if rest.first() != Some(&b) {
                    return false;
                }
                self.state = if rest.len() == 1 { self.after_value() } else { State::Literal { rest: &rest[1..] } };
                return true;
            }
            State::Number(num) => {
                if let Some(next) = num.next(b) {
                    self.state = State::Number(next);
                    return true;
                }
                if !num.can_end() {
                    return false;
                }
                // The byte ends the number and belongs to what follows.
                self.state = self.after_value();
            }
            _ => {}
        }
        if is_space(b) {
            return true;
        }
        match self.state {
            State::Value { first_in_array } => {
                if first_in_array && b == b']' {
                    return self.close(Frame::Array);
                }
                self.value(b)
            }
            State::Key { first } => match b {
                b'"' => {
                    self.state = State::Str { key: true, escape: false, hex: 0 };
                    true
                }
                b'}' if first => self.close(Frame::Object),
                _ => false,
            },
            State::Colon => {
                self.state = State::Value { first_in_array: false };
                b == b':'
            }
            State::AfterValue => match (self.stack.last(), b) {
                (Some(Frame::Object), b',') => {
                    self.state = State::Key { first: false };
                    true
                }
                (Some(Frame::Array), b',') => {
                    self.state = State::Value { first_in_array: false };
                    true
                }
                (Some(Frame::Object), b'}') => self.close(Frame::Object),
                (Some(Frame::Array), b']') => self.close(Frame::Array),
                _ => false,
            },
            State::Done => false,
            State::Str { .. } | State::Literal { .. } | State::Number(_) => unreachable!("handled above"),
        }
    }

    /// The first byte of a value.
    fn value(&mut self, b: u8) -> bool {
        let top = self.stack.is_empty();
        if top && self.object_only && b != b'{' {
            return false;
        }
        self.state = match b {
            b'{' | b'[' if self.stack.len() >= MAX_DEPTH => return false,
            b'{' => {
                self.stack.push(Frame::Object);
                State::Key { first: true }
            }
            b'[' => {
                self.stack.push(Frame::Array);
                State::Value { first_in_array: true }
            }
            b'"' => State::Str { key: false, escape: false, hex: 0 },
            b'-' => State::Number(Num::Minus),
            b'0' => State::Number(Num::Zero),
            b'1'..=b'9' => State::Number(Num::Int),
            b't' => State::Literal { rest: b"rue" },
            b'f' => State::Literal { rest: b"alse" },
            b'n' => State::Literal { rest: b"ull" },
            _ => return false,
        };
        true
    }

    fn string(&mut self, key: bool, escape: bool, hex: u8, b: u8) -> bool {
        if hex > 0 {
            if !b.is_ascii_hexdigit() {
                return false;
            }
            self.state = State::Str { key, escape: false, hex: hex - 1 };
            return true;
        }
        if escape {
            self.state = match b {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => State::Str { key, escape: false, hex: 0 },
                b'u' => State::Str { key, escape: false, hex: 4 },
                _ => return false,
            };
            return true;
        }
        match b {
            b'"' => {
                self.state = if key { State::Colon } else { self.after_value() };
                true
            }
            b'\\' => {
                self.state = State::Str { key, escape: true, hex: 0 };
                true
            }
            // Control characters must be escaped; other bytes (UTF-8
            // included) stand for themselves.
            0x00..=0x1f => false,
            _ => true,
        }
    }

    /// The state after a complete value.
    fn after_value(&self) -> State {
        if self.stack.is_empty() {
            State::Done
        } else {
            State::AfterValue
        }
    }

    fn close(&mut self, frame: Frame) -> bool {
        if self.stack.pop() != Some(frame) {
            return false;
        }
        self.state = self.after_value();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reads(text: &str) -> (bool, bool) {
        let mut p = JsonPrefix { stack: Vec::new(), state: State::Value { first_in_array: false }, object_only: false };
        let ok = p.push_all(text.as_bytes());
        (ok, ok && p.is_complete())
    }

    #[test]
    fn whole_texts_are_complete() {
        for text in [
            r#"{}"#,
            r#"[]"#,
            r#" { "a" : [1, -2.5e+3, 0, true, false, null, "x\"\\\u00e9y"], "b": {"c": []} } "#,
            "\"caf\u{e9}\"",
            "0",
            "-0.5E-7",
            "[[[]], {}]",
        ] {
            assert_eq!(reads(text), (true, true), "{text}");
        }
    }

    #[test]
    fn prefixes_are_valid_but_incomplete() {
        for text in [r#"{"a": [1, 2"#, r#"{"a"#, r#"{"a": tr"#, "[1.", "-", r#""\u00"#, "[", r#"{"a":"#, "[12"] {
            let (ok, complete) = reads(text);
            assert!(ok && !complete, "{text}: {ok} {complete}");
        }
    }

    #[test]
    fn invalid_bytes_are_refused() {
        for text in [
            "}",
            "[1,]",
            r#"{"a" 1}"#,
            r#"{1: 2}"#,
            "01",
            "1.e3",
            "-a",
            "tru ",
            r#""\x""#,
            "\"a\nb\"",
            "[1 2]",
            "{}{}",
            r#"{"a":1,}"#,
            "[}",
            "nul1",
            "--1",
        ] {
            assert!(!reads(text).0, "{text:?} was taken");
        }
        assert_eq!(reads("1e"), (true, false), "an exponent still to come");
    }

    #[test]
    fn an_object_text_must_be_an_object() {
        let mut p = JsonPrefix::object();
        assert!(!p.clone().push_all(b"[1]"));
        assert!(!p.clone().push_all(b"\"x\""));
        assert!(p.push_all(b"  {\"k\": [1, {\"n\": null}]}"));
        assert!(p.is_complete());
        assert!(p.clone().push_all(b" \n"), "whitespace may follow");
        assert!(!p.push(b','), "nothing else may");
    }

    #[test]
    fn depth_is_bounded() {
        let mut p = JsonPrefix::object();
        assert!(p.push(b'{'));
        assert!(p.push_all(b"\"a\":"));
        let deep = "[".repeat(MAX_DEPTH - 1);
        assert!(p.push_all(deep.as_bytes()));
        assert!(!p.push(b'['), "one more container than allowed");
    }
}
