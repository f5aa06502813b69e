//! Random JSON Schemas of the keywords constrained decoding serves, and
//! the shapes that once froze or crashed the schema compiler, for the
//! grammar engine's tests and the server's hostile-client tests alike.

use serde_json::{json, Map, Value};

/// Property names, some of which need escapes in JSON.
pub const NAMES: [&str; 6] = ["a", "b", "q\"", "s\\", "t\t", "\u{e9}"];

/// `levels` `$defs`, each an `anyOf` of the next one twice (2^levels paths
/// through them), ending in `null`.
pub fn doubling(levels: usize) -> Value {
    let mut defs = Map::new();
    for i in 0..levels {
        let next = json!({"$ref": format!("#/$defs/a{}", i + 1)});
        defs.insert(format!("a{i}"), json!({"anyOf": [next.clone(), next]}));
    }
    defs.insert(format!("a{levels}"), json!({"type": "null"}));
    json!({"$defs": defs, "$ref": "#/$defs/a0"})
}

/// `links` `$defs`, each an array whose items are the next, ending in
/// `null` (a chain of references through `items`).
pub fn items_chain(links: usize) -> Value {
    let mut defs = Map::new();
    for i in 0..links {
        defs.insert(format!("d{i}"), json!({"type": "array", "items": {"$ref": format!("#/$defs/d{}", i + 1)}}));
    }
    defs.insert(format!("d{links}"), json!({"type": "null"}));
    json!({"$defs": defs, "$ref": "#/$defs/d0"})
}

/// `levels` objects, each requiring the next as `a`, the last empty: a
/// text of exactly `levels` levels of nesting.
pub fn required_chain(levels: usize) -> Value {
    let mut defs = Map::new();
    for i in 0..levels.saturating_sub(1) {
        let next = json!({"$ref": format!("#/$defs/d{}", i + 1)});
        let object =
            json!({"type": "object", "properties": {"a": next}, "required": ["a"], "additionalProperties": false});
        defs.insert(format!("d{i}"), object);
    }
    defs.insert(format!("d{}", levels.saturating_sub(1)), json!({"type": "object", "additionalProperties": false}));
    json!({"$defs": defs, "$ref": "#/$defs/d0"})
}

/// Random schemas: types, nested objects and arrays, `enum`, `const`,
/// `anyOf`, and `$ref`s into up to three `$defs` (chains, fans and loops
/// among them), names that need escapes, empty and closed objects,
/// required names listed twice or not declared. Some cannot be served
/// (a required property that contains itself); the tests expect those
/// refused.
pub struct SchemaGen {
    state: u64,
    defs: usize,
}

impl SchemaGen {
    /// A generator from `seed` (any value).
    pub fn new(seed: u64) -> SchemaGen {
        SchemaGen { state: seed | 1, defs: 0 }
    }

    fn below(&mut self, n: u64) -> u64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state % n
    }

    fn pick<T: Clone>(&mut self, list: &[T]) -> T {
        list[self.below(list.len() as u64) as usize].clone()
    }

    /// The next schema document.
    pub fn document(&mut self) -> Value {
        self.defs = self.below(4) as usize;
        let defs: Map<String, Value> = (0..self.defs).map(|i| (format!("d{i}"), self.schema(0))).collect();
        let mut root = self.schema(0);
        if let (Some(object), false) = (root.as_object_mut(), defs.is_empty()) {
            if object.contains_key("$ref") {
                root = json!({"$defs": defs, "anyOf": [root, {"type": "null"}]});
            } else {
                object.insert("$defs".into(), Value::Object(defs));
            }
        }
        root
    }

    fn schema(&mut self, depth: u32) -> Value {
        let choice = if depth >= 3 { self.below(4) } else { self.below(11) };
        match choice {
            0 => {
                let kind = self.pick(&["string", "number", "integer", "boolean", "null"]);
                let mut s = json!({"type": kind});
                if kind == "string" && self.below(2) == 0 {
                    let min = self.below(3);
                    s["minLength"] = json!(min);
                    s["maxLength"] = json!(min + self.below(3));
                }
                s
            }
            1 => {
                let pool = [json!("x"), json!(1), json!(null), json!(true), json!({"a": 1}), json!([1, "y"])];
                let n = 1 + self.below(3) as usize;
                json!({"enum": (0..n).map(|_| self.pick(&pool)).collect::<Vec<_>>()})
            }
            2 => json!({"const": self.pick(&[json!("c"), json!(2.5), json!(false)])}),
            3 if self.defs > 0 => json!({"$ref": format!("#/$defs/d{}", self.below(self.defs as u64))}),
            3 => json!({}),
            4..=6 => {
                let mut properties = Map::new();
                for _ in 0..self.below(4) {
                    let name = self.pick(&NAMES);
                    properties.insert(name.to_string(), self.schema(depth + 1));
                }
                let required: Vec<&str> = (0..self.below(3)).map(|_| self.pick(&NAMES)).collect();
                let mut s = json!({"type": "object", "properties": properties, "required": required});
                match self.below(4) {
                    0 => s["additionalProperties"] = json!(false),
                    1 => s["additionalProperties"] = self.schema(depth + 1),
                    _ => {}
                }
                s
            }
            7 | 8 => {
                let min = self.below(3);
                let mut s = json!({"type": "array", "items": self.schema(depth + 1), "minItems": min});
                if self.below(2) == 0 {
                    s["maxItems"] = json!(min + self.below(3));
                }
                s
            }
            9 => json!({"anyOf": (0..1 + self.below(3)).map(|_| self.schema(depth + 1)).collect::<Vec<_>>()}),
            _ => json!({"type": self.pick(&[json!(["object", "null"]), json!(["array", "string"]), json!("object")])}),
        }
    }
}

/// What pydantic writes for a model (`Record`) with `Field(ge=0)`, a pattern, a
/// `datetime`, a minimum and a discriminated union (`$defs`, `$ref`,
/// `oneOf`), none of which says `additionalProperties`.
pub fn pydantic_record() -> Value {
    json!({
        "$defs": {
            "Cat": {"properties": {"kind": {"const": "cat", "type": "string"},
                                   "lives": {"maximum": 9, "minimum": 1, "type": "integer"}},
                    "required": ["kind", "lives"], "title": "Cat", "type": "object"},
            "Dog": {"properties": {"kind": {"const": "dog", "type": "string"},
                                   "good": {"type": "boolean"}},
                    "required": ["kind", "good"], "title": "Dog", "type": "object"},
        },
        "properties": {
            "count": {"minimum": 0, "title": "Count", "type": "integer"},
            "code": {"pattern": "^[A-Z]{3}$", "title": "Code", "type": "string"},
            "when": {"format": "date-time", "title": "When", "type": "string"},
            "pet": {"discriminator": {"mapping": {"cat": "#/$defs/Cat", "dog": "#/$defs/Dog"}, "propertyName": "kind"},
                    "oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}], "title": "Pet"},
        },
        "required": ["count", "code", "when", "pet"],
        "title": "Record",
        "type": "object",
    })
}

/// Whether `value` is a Record of [`pydantic_record`] whose count is at
/// most `max_count`; `Err` says what is not.
pub fn pydantic_record_check(value: &Value, max_count: i64) -> Result<(), String> {
    let object = value.as_object().ok_or("not an object")?;
    let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
    keys.sort_unstable();
    if keys != ["code", "count", "pet", "when"] {
        return Err(format!("keys {keys:?}"));
    }
    let count = value["count"].as_i64().ok_or("count is not an integer")?;
    if !(0..=max_count).contains(&count) {
        return Err(format!("count {count}"));
    }
    let code = value["code"].as_str().ok_or("code")?;
    if !(code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase())) {
        return Err(format!("code {code:?}"));
    }
    let when = value["when"].as_str().ok_or("when")?.as_bytes();
    let digits_at = |at: &[usize]| at.iter().all(|&i| when.get(i).is_some_and(u8::is_ascii_digit));
    let shape = digits_at(&[0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18])
        && [(4, b'-'), (7, b'-'), (13, b':'), (16, b':')].iter().all(|&(i, c)| when.get(i) == Some(&c))
        && matches!(when.get(10), Some(b'T' | b't'));
    if !shape {
        return Err(format!("when {:?}", String::from_utf8_lossy(when)));
    }
    let pet = value["pet"].as_object().ok_or("pet")?;
    match (pet.get("kind").and_then(Value::as_str), pet.len()) {
        (Some("cat"), 2) if (1..=9).contains(&pet.get("lives").and_then(Value::as_i64).unwrap_or(0)) => Ok(()),
        (Some("dog"), 2) if pet.get("good").is_some_and(Value::is_boolean) => Ok(()),
        _ => Err(format!("pet {pet:?}")),
    }
}
