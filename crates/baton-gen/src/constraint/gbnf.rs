//! GBNF (llama.cpp's grammar format, what llama-server's `grammar` field
//! takes) read and written out as the Lark-like text llguidance compiles.
//!
//! A grammar is rules `name ::= alternatives`; the rule `root` is the whole
//! text. Elements: `"literals"` and `[character classes]` (ranges, `^`
//! negation, `\x..`, `\u....`, `\U........`, `\t`, `\n`, `\r`, `\\`
//! escapes), `.` (any character), rule names, `( groups )`, `|`, and the
//! repetitions `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}`, `{,n}`; `#` comments.
//! A rule runs until the next `name ::=`. Special tokens written `<...>`
//! pass through as llguidance reads them.
//!
//! Names are written out as they are where Lark reads them as rules
//! (lower case, digits, `-`); others become `r_N` (GBNF names have no `_`,
//! so these cannot meet one of them).

use std::collections::HashMap;
use std::fmt::Write;

/// Why a GBNF text could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("GBNF line {line}: {message}")]
pub struct GbnfError {
    /// The line (from 1) where the problem is.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Most bytes of GBNF text read.
pub const MAX_GBNF_BYTES: usize = 1 << 20;

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Define,
    Name(String),
    Literal(String),
    /// `(negated, ranges)`.
    Class(bool, Vec<(char, char)>),
    Any,
    Special(String),
    Open,
    Close,
    Or,
    Repeat(String),
}

struct Lexer<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    line: usize,
}

impl Lexer<'_> {
    fn error(&self, message: impl Into<String>) -> GbnfError {
        GbnfError { line: self.line, message: message.into() }
    }

    fn next_char(&mut self) -> Option<char> {
        let c = self.chars.next();
        if c == Some('\n') {
            self.line += 1;
        }
        c
    }

    /// One character of a literal or a class, escapes read.
    fn escaped(&mut self, what: &str) -> Result<char, GbnfError> {
        let c = self.next_char().ok_or_else(|| self.error(format!("unterminated {what}")))?;
        if c != '\\' {
            return Ok(c);
        }
        let e = self.next_char().ok_or_else(|| self.error(format!("unterminated {what}")))?;
        let digits = match e {
            'x' => 2,
            'u' => 4,
            'U' => 8,
            't' => return Ok('\t'),
            'n' => return Ok('\n'),
            'r' => return Ok('\r'),
            '\\' | '"' | '[' | ']' | '-' | '^' | '/' => return Ok(e),
            other => return Err(self.error(format!("unknown escape `\\{other}` in {what}"))),
        };
        let hex: String = (0..digits).filter_map(|_| self.next_char()).collect();
        u32::from_str_radix(&hex, 16)
            .ok()
            .filter(|_| hex.len() == digits)
            .and_then(char::from_u32)
            .ok_or_else(|| self.error(format!("`\\{e}{hex}` in {what} is not a character")))
    }

    fn tokens(mut self) -> Result<Vec<(Token, usize)>, GbnfError> {
        let mut out = Vec::new();
        while let Some(&c) = self.chars.peek() {
            let line = self.line;
            let token = match c {
                c if c.is_whitespace() => {
                    self.next_char();
                    continue;
                }
                '#' => {
                    while self.chars.peek().is_some_and(|&c| c != '\n') {
                        self.next_char();
                    }
                    continue;
                }
                ':' => {
                    let define: String = (0..3).filter_map(|_| self.next_char()).collect();
                    if define != "::=" {
                        return Err(self.error(format!("`{define}` where `::=` was expected")));
                    }
                    Token::Define
                }
                '"' => {
                    self.next_char();
                    let mut text = String::new();
                    while self.chars.peek() != Some(&'"') {
                        text.push(self.escaped("string")?);
                    }
                    self.next_char();
                    Token::Literal(text)
                }
                '[' => {
                    self.next_char();
                    let negated = self.chars.next_if_eq(&'^').is_some();
                    let mut ranges = Vec::new();
                    while self.chars.peek() != Some(&']') {
                        let mut low = self.escaped("character class")?;
                        let high = match self.chars.next_if_eq(&'-') {
                            Some(_) if self.chars.peek() != Some(&']') => self.escaped("character class")?,
                            Some(_) => {
                                // A `-` last in the class is itself.
                                ranges.push((low, low));
                                low = '-';
                                '-'
                            }
                            None => low,
                        };
                        if high < low {
                            return Err(self.error(format!("the range `{low}-{high}` runs backwards")));
                        }
                        ranges.push((low, high));
                    }
                    self.next_char();
                    Token::Class(negated, ranges)
                }
                '<' => {
                    let mut text = String::new();
                    while let Some(c) = self.next_char() {
                        text.push(c);
                        if c == '>' || c.is_whitespace() {
                            break;
                        }
                    }
                    if !text.ends_with('>') {
                        return Err(self.error(format!("unterminated token `{text}`")));
                    }
                    Token::Special(text)
                }
                '{' => {
                    let mut text = String::from("{");
                    self.next_char();
                    while let Some(c) = self.next_char() {
                        if c == '}' {
                            break;
                        }
                        if !(c.is_ascii_digit() || c == ',' || c == ' ') {
                            return Err(self.error(format!("`{c}` in a repetition `{{m,n}}`")));
                        }
                        text.extend((c != ' ').then_some(c));
                    }
                    match text.strip_prefix("{,") {
                        Some(rest) => Token::Repeat(format!("{{0,{rest}}}")),
                        None => Token::Repeat(text + "}"),
                    }
                }
                '.' | '(' | ')' | '|' | '*' | '+' | '?' => {
                    self.next_char();
                    match c {
                        '.' => Token::Any,
                        '(' => Token::Open,
                        ')' => Token::Close,
                        '|' => Token::Or,
                        _ => Token::Repeat(c.to_string()),
                    }
                }
                c if c.is_ascii_alphanumeric() || c == '-' || c == '_' => {
                    let mut name = String::new();
                    while let Some(c) = self.chars.next_if(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_') {
                        name.push(c);
                    }
                    Token::Name(name)
                }
                other => return Err(self.error(format!("unexpected `{other}`"))),
            };
            out.push((token, line));
        }
        Ok(out)
    }
}

/// A character of a class, written so that a regular expression's class
/// reads it as itself.
fn class_char(out: &mut String, c: char) {
    match c.is_ascii_alphanumeric() {
        true => out.push(c),
        false => {
            let _ = write!(out, "\\x{{{:x}}}", u32::from(c));
        }
    }
}

/// The Lark name of a GBNF rule name.
fn lark_name(name: &str, names: &mut HashMap<String, String>) -> String {
    let next = names.len();
    names
        .entry(name.to_string())
        .or_insert_with(|| {
            let plain = name.starts_with(|c: char| c.is_ascii_lowercase())
                && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && name != "start";
            match plain {
                true => name.to_string(),
                false => format!("r_{next}"),
            }
        })
        .clone()
}

/// The Lark text of a GBNF grammar (its `root` rule as `start`).
pub fn gbnf_to_lark(gbnf: &str) -> Result<String, GbnfError> {
    if gbnf.len() > MAX_GBNF_BYTES {
        return Err(GbnfError { line: 1, message: format!("the grammar is over {MAX_GBNF_BYTES} bytes") });
    }
    let tokens = Lexer { chars: gbnf.chars().peekable(), line: 1 }.tokens()?;
    let mut names = HashMap::new();
    let mut defined: HashMap<String, usize> = HashMap::new();
    let mut used: Vec<(String, usize)> = Vec::new();
    let mut lark = String::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        let (token, line) = &tokens[i];
        let error = |message: String| GbnfError { line: *line, message };
        let starts_rule = matches!(token, Token::Name(_)) && tokens.get(i + 1).is_some_and(|t| t.0 == Token::Define);
        if starts_rule {
            let Token::Name(name) = token else { unreachable!("checked just above") };
            if depth > 0 {
                return Err(error(format!("a `(` is still open where the rule `{name}` starts")));
            }
            if let Some(first) = defined.insert(name.clone(), *line) {
                return Err(error(format!("the rule `{name}` is defined twice (first on line {first})")));
            }
            let _ = write!(lark, "\n{}: ", lark_name(name, &mut names));
            i += 2;
            continue;
        }
        if defined.is_empty() {
            return Err(error("the grammar must start with a rule, `name ::= ...`".into()));
        }
        match token {
            Token::Define => return Err(error("`::=` without a rule name before it".into())),
            Token::Name(name) => {
                used.push((name.clone(), *line));
                lark.push_str(&lark_name(name, &mut names));
            }
            Token::Literal(text) if text.is_empty() => lark.push_str("\"\""),
            Token::Literal(text) => lark.push_str(&serde_json::Value::from(text.as_str()).to_string()),
            Token::Class(negated, ranges) => {
                lark.push_str(if *negated { "/[^" } else { "/[" });
                for &(low, high) in ranges {
                    class_char(&mut lark, low);
                    if high != low {
                        lark.push('-');
                        class_char(&mut lark, high);
                    }
                }
                lark.push_str("]/");
            }
            Token::Any => lark.push_str("/(?s:.)/"),
            Token::Special(text) => lark.push_str(text),
            Token::Open => {
                depth += 1;
                lark.push('(');
            }
            Token::Close => {
                depth = depth.checked_sub(1).ok_or_else(|| error("a `)` closes nothing".into()))?;
                lark.push(')');
            }
            Token::Or => lark.push('|'),
            Token::Repeat(op) => {
                lark.pop();
                lark.push_str(op);
            }
        }
        lark.push(' ');
        i += 1;
    }
    if depth > 0 {
        return Err(GbnfError { line: tokens.last().map_or(1, |t| t.1), message: "a `(` is never closed".into() });
    }
    if let Some((name, line)) = used.iter().find(|(name, _)| !defined.contains_key(name)) {
        return Err(GbnfError { line: *line, message: format!("the rule `{name}` is used but never defined") });
    }
    if !defined.contains_key("root") {
        return Err(GbnfError { line: 1, message: "no `root` rule: the grammar's text is its `root`".into() });
    }
    Ok(format!("start: {}\n{lark}\n", lark_name("root", &mut names)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_literals_classes_and_repetitions_become_lark() {
        let lark = gbnf_to_lark(
            "root ::= Item (\", \" Item){0,3} # items\nItem ::= [a-z0-9_-]+ \"\\x41\" | \"-\"?\n  \"q\\\"\" .",
        )
        .expect("reads");
        assert!(lark.starts_with("start: root\n"), "{lark}");
        assert!(lark.contains("root: r_1 ( \", \" r_1 ){0,3}"), "{lark}");
        assert!(lark.contains(r#"r_1: /[a-z0-9\x{5f}\x{2d}]/+ "A" | "-"? "q\"" /(?s:.)/"#), "{lark}");
    }

    #[test]
    fn bad_grammars_name_the_line_and_the_problem() {
        for (gbnf, line, says) in [
            ("root ::= item", 1, "`item` is used but never defined"),
            ("item ::= \"a\"", 1, "no `root` rule"),
            ("root ::= \"a\"\nroot ::= \"b\"", 2, "defined twice"),
            ("root ::= (\"a\"", 1, "never closed"),
            ("root ::= \"a\")", 1, "closes nothing"),
            ("root ::= \"a", 1, "unterminated string"),
            ("root ::=\n [z-a]", 2, "runs backwards"),
            ("root ::= \"\\q\"", 1, "unknown escape"),
            ("\"a\"", 1, "must start with a rule"),
            ("root := \"a\"", 1, "where `::=` was expected"),
            ("root ::= \"a\"{x}", 1, "repetition"),
        ] {
            let error = gbnf_to_lark(gbnf).expect_err(gbnf);
            assert_eq!(error.line, line, "{gbnf}: {error}");
            assert!(error.to_string().contains(says), "{gbnf}: {error}");
        }
    }
}
