//! A minimal JSON parser for the reference test (numbers kept as text so
//! 64-bit integers survive exactly). Test-only; panics on malformed input.

#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Number(String),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    pub fn parse(text: &str) -> Json {
        let mut p = Parser { s: text.as_bytes(), i: 0 };
        let v = p.value();
        p.ws();
        assert_eq!(p.i, p.s.len(), "trailing characters in JSON");
        v
    }
    pub fn get(&self, key: &str) -> &Json {
        match self {
            Json::Object(pairs) => pairs
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v)
                .unwrap_or_else(|| panic!("JSON object has no key {key:?}: {self:?}")),
            other => panic!("expected an object with {key:?}, got {other:?}"),
        }
    }
    pub fn items(&self) -> &[Json] {
        match self {
            Json::Array(items) => items,
            other => panic!("expected a JSON array, got {other:?}"),
        }
    }
    pub fn str(&self) -> &str {
        match self {
            Json::String(s) => s,
            other => panic!("expected a JSON string, got {other:?}"),
        }
    }
    pub fn int(&self) -> i128 {
        match self {
            Json::Number(n) => n.parse().unwrap_or_else(|_| panic!("{n} is not an integer")),
            Json::Bool(b) => i128::from(*b),
            other => panic!("expected a JSON integer, got {other:?}"),
        }
    }
    pub fn float(&self) -> f64 {
        match self {
            Json::Number(n) => n.parse().unwrap_or_else(|_| panic!("{n} is not a number")),
            other => panic!("expected a JSON number, got {other:?}"),
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn eat(&mut self, lit: &str) -> bool {
        if self.s[self.i..].starts_with(lit.as_bytes()) {
            self.i += lit.len();
            true
        } else {
            false
        }
    }
    fn value(&mut self) -> Json {
        self.ws();
        let first = self.s[self.i];
        match first {
            b'{' => {
                self.i += 1;
                let mut pairs = Vec::new();
                self.ws();
                if !self.eat("}") {
                    loop {
                        self.ws();
                        let key = self.string();
                        self.ws();
                        assert!(self.eat(":"), "expected ':' at {}", self.i);
                        pairs.push((key, self.value()));
                        self.ws();
                        if self.eat("}") {
                            break;
                        }
                        assert!(self.eat(","), "expected ',' at {}", self.i);
                    }
                }
                Json::Object(pairs)
            }
            b'[' => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if !self.eat("]") {
                    loop {
                        items.push(self.value());
                        self.ws();
                        if self.eat("]") {
                            break;
                        }
                        assert!(self.eat(","), "expected ',' at {}", self.i);
                    }
                }
                Json::Array(items)
            }
            b'"' => Json::String(self.string()),
            _ if self.eat("null") => Json::Null,
            _ if self.eat("true") => Json::Bool(true),
            _ if self.eat("false") => Json::Bool(false),
            _ => {
                let start = self.i;
                while self.i < self.s.len() && b"+-.eE0123456789".contains(&self.s[self.i]) {
                    self.i += 1;
                }
                assert!(self.i > start, "unexpected JSON at {start}");
                Json::Number(String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
            }
        }
    }
    fn string(&mut self) -> String {
        assert!(self.eat("\""), "expected a string at {}", self.i);
        let mut out = String::new();
        loop {
            let c = self.s[self.i];
            self.i += 1;
            match c {
                b'"' => return out,
                b'\\' => {
                    let e = self.s[self.i];
                    self.i += 1;
                    match e {
                        b'n' => out.push('\n'),
                        b't' => out.push('\t'),
                        b'r' => out.push('\r'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'u' => {
                            let mut code = self.hex4();
                            if (0xd800..0xdc00).contains(&code) && self.eat("\\u") {
                                code = 0x10000 + ((code - 0xd800) << 10) + (self.hex4() - 0xdc00);
                            }
                            out.push(char::from_u32(code).expect("valid JSON escape"));
                        }
                        other => out.push(other as char),
                    }
                }
                _ => {
                    // ensure_ascii output: every other byte is ASCII.
                    out.push(c as char);
                }
            }
        }
    }
    fn hex4(&mut self) -> u32 {
        let text = std::str::from_utf8(&self.s[self.i..self.i + 4]).expect("ASCII hex");
        self.i += 4;
        u32::from_str_radix(text, 16).expect("hex escape")
    }
}
