//! The defaults structured-output users expect, written into a JSON Schema
//! before llguidance compiles it (as llama.cpp's and XGrammar's schema
//! readers apply them):
//!
//! - an object schema that declares `properties` and says nothing of those
//!   it does not declare
//!   (no `additionalProperties`, `patternProperties` nor
//!   `unevaluatedProperties`) allows none: `additionalProperties: false`.
//!   Branches of an `allOf` are left as they are (each branch sees only
//!   its own properties, so closing them would refuse the others').
//! - an `integer` or `number` without a bound on a side gets
//!   [`INTEGER_BOUND`] there, so its integer part has at most
//!   [`MAX_INTEGER_DIGITS`] digits (llama.cpp's limit); a bounded number
//!   has no exponent in llguidance. A number's fraction stays unbounded
//!   (JSON Schema has no word for it).
//! - `oneOf` is read as `anyOf` (llguidance's `coerce_one_of`, as
//!   llama.cpp does): the branches of discriminated unions exclude one
//!   another by their tags anyway.
//! - whitespace between tokens: at most [`MAX_WHITESPACE`] bytes in a row,
//!   so a model cannot pad forever.

use serde_json::{json, Map, Value};

/// Most digits of an integer, or of a number's integer part, whose schema
/// does not bound it.
pub const MAX_INTEGER_DIGITS: u32 = 16;

/// The bound given to an unbounded side: 16 nines.
pub const INTEGER_BOUND: i64 = 10i64.pow(MAX_INTEGER_DIGITS) - 1;

/// Most whitespace bytes between two tokens of the JSON text.
pub const MAX_WHITESPACE: usize = 24;

/// `schema` with the defaults above, and llguidance's compile options
/// under `x-guidance` (the schema's own `x-guidance` keys, if any, win).
pub fn with_defaults(schema: &Value) -> Value {
    let mut schema = schema.clone();
    visit(&mut schema, false);
    let options = json!({
        "whitespace_pattern": format!("[\\x20\\x0A\\x0D\\x09]{{1,{MAX_WHITESPACE}}}"),
        "coerce_one_of": true,
    });
    match &mut schema {
        Value::Object(map) => {
            let mut merged = options.as_object().cloned().unwrap_or_default();
            if let Some(Value::Object(own)) = map.get("x-guidance") {
                merged.extend(own.clone());
            }
            map.insert("x-guidance".into(), Value::Object(merged));
            schema
        }
        // `true`, `false`: wrapped so the options have a place.
        other => json!({"allOf": [other.clone()], "x-guidance": options}),
    }
}

/// Whether `map`'s `type` names `name` (alone or in a list).
fn has_type(map: &Map<String, Value>, name: &str) -> bool {
    match map.get("type") {
        Some(Value::String(t)) => t == name,
        Some(Value::Array(types)) => types.iter().any(|t| t == name),
        _ => false,
    }
}

/// Applies the defaults to one schema and the schemas inside it;
/// `in_all_of` for a direct branch of an `allOf`.
fn visit(schema: &mut Value, in_all_of: bool) {
    let Value::Object(map) = schema else { return };
    // `{"type": "object"}` alone is any object.
    let declares = map.contains_key("properties");
    let says_extra =
        ["additionalProperties", "patternProperties", "unevaluatedProperties"].iter().any(|k| map.contains_key(*k));
    if declares && !says_extra && !in_all_of {
        map.insert("additionalProperties".into(), Value::Bool(false));
    }
    if has_type(map, "integer") || has_type(map, "number") {
        if !map.contains_key("minimum") && !map.contains_key("exclusiveMinimum") {
            map.insert("minimum".into(), json!(-INTEGER_BOUND));
        }
        if !map.contains_key("maximum") && !map.contains_key("exclusiveMaximum") {
            map.insert("maximum".into(), json!(INTEGER_BOUND));
        }
    }
    for (key, value) in map.iter_mut() {
        match key.as_str() {
            // Maps of names to schemas.
            "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => {
                if let Value::Object(entries) = value {
                    entries.values_mut().for_each(|s| visit(s, false));
                }
            }
            // Lists of schemas.
            "anyOf" | "oneOf" | "prefixItems" => {
                if let Value::Array(entries) = value {
                    entries.iter_mut().for_each(|s| visit(s, false));
                }
            }
            "allOf" => {
                if let Value::Array(entries) = value {
                    entries.iter_mut().for_each(|s| visit(s, true));
                }
            }
            // One schema, or (`items` of old drafts) a list.
            "items" => match value {
                Value::Array(entries) => entries.iter_mut().for_each(|s| visit(s, false)),
                other => visit(other, false),
            },
            "additionalProperties"
            | "unevaluatedProperties"
            | "additionalItems"
            | "contains"
            | "not"
            | "if"
            | "then"
            | "else"
            | "propertyNames" => visit(value, false),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_close_and_numbers_are_bounded_where_the_schema_is_silent() {
        let schema = json!({
            "type": "object",
            "properties": {
                "properties": {"type": "integer", "minimum": 0},
                "open": {"type": "object", "additionalProperties": true},
                "parts": {"allOf": [{"properties": {"a": {"type": "number"}}}]},
                "tagged": {"oneOf": [{"$ref": "#/$defs/cat"}]},
                "const": {"const": {"type": "object"}},
            },
            "$defs": {"cat": {"type": "object", "properties": {"n": {"type": ["integer", "null"]}}}},
        });
        let strict = with_defaults(&schema);
        assert_eq!(strict["additionalProperties"], false);
        let property = &strict["properties"]["properties"];
        assert_eq!((&property["minimum"], &property["maximum"]), (&json!(0), &json!(INTEGER_BOUND)));
        assert_eq!(strict["properties"]["open"]["additionalProperties"], true);
        let branch = &strict["properties"]["parts"]["allOf"][0];
        assert!(branch.get("additionalProperties").is_none(), "an allOf branch stays open: {branch}");
        assert_eq!(branch["properties"]["a"]["minimum"], -INTEGER_BOUND);
        assert_eq!(strict["$defs"]["cat"]["additionalProperties"], false);
        assert_eq!(strict["$defs"]["cat"]["properties"]["n"]["maximum"], INTEGER_BOUND);
        assert_eq!(strict["properties"]["const"], json!({"const": {"type": "object"}}), "values are not schemas");
        assert_eq!(strict["x-guidance"]["coerce_one_of"], true);
    }

    #[test]
    fn the_schemas_own_compile_options_win() {
        let strict = with_defaults(&json!({"x-guidance": {"coerce_one_of": false}}));
        assert_eq!(strict["x-guidance"]["coerce_one_of"], false);
        assert!(strict["x-guidance"]["whitespace_pattern"].is_string());
        assert_eq!(with_defaults(&json!(true))["allOf"], json!([true]));
    }
}
