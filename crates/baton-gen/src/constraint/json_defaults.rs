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
//! - a value of any type (`{}`, `true`, an annotation alone, an object
//!   without `properties` or an array without `items` that say nothing of
//!   their contents, `additionalProperties: true`) is any JSON value with
//!   the bounds above, through [`ANY_JSON`] (llguidance's own any-value
//!   lets numbers run to hundreds of digits).
//! - `format: "date-time"` and `"time"`: their fractional seconds have at
//!   most [`MAX_FRACTION_DIGITS`] digits (llguidance's formats let a model
//!   write zeros until `max_tokens`), through the same patterns otherwise.
//! - `oneOf` is read as `anyOf` (llguidance's `coerce_one_of`, as
//!   llama.cpp does): the branches of discriminated unions exclude one
//!   another by their tags anyway.
//! - whitespace between tokens as llama.cpp's grammars allow it: one
//!   space, or a newline and at most [`MAX_INDENT`] spaces or tabs, so a
//!   model cannot pad forever.

use serde_json::{json, Map, Value};

/// Most digits of an integer, or of a number's integer part, whose schema
/// does not bound it.
pub const MAX_INTEGER_DIGITS: u32 = 16;

/// The bound given to an unbounded side: 16 nines.
pub const INTEGER_BOUND: i64 = 10i64.pow(MAX_INTEGER_DIGITS) - 1;

/// Most spaces or tabs after a newline between two tokens of the JSON
/// text (llama.cpp's limit).
pub const MAX_INDENT: usize = 20;

/// Most digits of the fraction of a second in a `date-time` or `time`.
pub const MAX_FRACTION_DIGITS: usize = 9;

/// A `time` of RFC 3339 with at most [`MAX_FRACTION_DIGITS`] fraction
/// digits (llguidance's `time` format, bounded).
fn time() -> String {
    let zone = r"(?:[zZ]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
    format!(r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?:\.[0-9]{{1,{MAX_FRACTION_DIGITS}}})?{zone}")
}

/// A `date` of RFC 3339 (llguidance's `date` format).
const DATE: &str = r"[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-9]))";

/// The name under `$defs` of the bounded any-value schema.
pub const ANY_JSON: &str = "baton-any-json";

/// Keywords that say nothing of a value: a schema of these alone accepts
/// any value.
const ANNOTATIONS: [&str; 11] = [
    "title",
    "description",
    "default",
    "examples",
    "$comment",
    "$schema",
    "$id",
    "deprecated",
    "readOnly",
    "writeOnly",
    "format",
];

/// Any JSON value, numbers bounded.
fn any_json() -> Value {
    let any = json!({"$ref": format!("#/$defs/{ANY_JSON}")});
    json!({"anyOf": [
        {"type": "null"}, {"type": "boolean"}, {"type": "string"},
        {"type": "number", "minimum": -INTEGER_BOUND, "maximum": INTEGER_BOUND},
        {"type": "array", "items": any},
        {"type": "object", "additionalProperties": any},
    ]})
}

/// Whether `schema` accepts any value.
fn is_any(schema: &Value) -> bool {
    match schema {
        Value::Bool(true) => true,
        Value::Object(map) => map.keys().all(|k| ANNOTATIONS.contains(&k.as_str())),
        _ => false,
    }
}

/// `schema` with the defaults above, and llguidance's compile options
/// under `x-guidance` (the schema's own `x-guidance` keys, if any, win).
pub fn with_defaults(schema: &Value) -> Value {
    let mut schema = match is_any(schema) {
        true => any_json(),
        false => schema.clone(),
    };
    visit(&mut schema, false);
    if let Value::Object(map) = &mut schema {
        let defs = map.entry("$defs").or_insert_with(|| json!({}));
        if let Value::Object(defs) = defs {
            defs.insert(ANY_JSON.into(), any_json());
        }
    }
    let options = json!({
        "whitespace_pattern": format!("(?: |\\n[ \\t]{{0,{MAX_INDENT}}})"),
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
    if is_any(schema) {
        *schema = json!({"$ref": format!("#/$defs/{ANY_JSON}")});
        return;
    }
    let Value::Object(map) = schema else { return };
    // `{"type": "object"}` alone is any object.
    let declares = map.contains_key("properties");
    let says_extra =
        ["additionalProperties", "patternProperties", "unevaluatedProperties"].iter().any(|k| map.contains_key(*k));
    if declares && !says_extra && !in_all_of {
        map.insert("additionalProperties".into(), Value::Bool(false));
    }
    let any = || json!({"$ref": format!("#/$defs/{ANY_JSON}")});
    if has_type(map, "object") && !declares && !says_extra {
        map.insert("additionalProperties".into(), any());
    }
    if has_type(map, "array") && !map.contains_key("items") && !map.contains_key("prefixItems") {
        map.insert("items".into(), any());
    }
    let bounded_format = match map.get("format").and_then(Value::as_str) {
        Some("date-time") => Some(format!("^{DATE}[tT]{}$", time())),
        Some("time") => Some(format!("^{}$", time())),
        _ => None,
    };
    if let (Some(pattern), false) = (bounded_format, map.contains_key("pattern")) {
        map.remove("format");
        map.insert("pattern".into(), Value::String(pattern));
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
        let bounded_any = json!({"$ref": format!("#/$defs/{ANY_JSON}")});
        assert_eq!(strict["properties"]["open"]["additionalProperties"], bounded_any, "open, numbers bounded");
        let branch = &strict["properties"]["parts"]["allOf"][0];
        assert!(branch.get("additionalProperties").is_none(), "an allOf branch stays open: {branch}");
        assert_eq!(branch["properties"]["a"]["minimum"], -INTEGER_BOUND);
        assert_eq!(strict["$defs"]["cat"]["additionalProperties"], false);
        assert_eq!(strict["$defs"]["cat"]["properties"]["n"]["maximum"], INTEGER_BOUND);
        assert_eq!(strict["properties"]["const"], json!({"const": {"type": "object"}}), "values are not schemas");
        assert_eq!(strict["x-guidance"]["coerce_one_of"], true);
        let open = with_defaults(&json!({"type": "object", "properties": {"a": {"description": "any"},
            "b": {"type": "array"}}, "additionalProperties": true}));
        assert_eq!((&open["additionalProperties"], &open["properties"]["a"]), (&bounded_any, &bounded_any));
        assert_eq!(open["properties"]["b"]["items"], bounded_any);
        assert_eq!(open["$defs"][ANY_JSON]["anyOf"][3]["maximum"], INTEGER_BOUND);
        assert_eq!(with_defaults(&json!({"type": "object"}))["additionalProperties"], bounded_any);
    }

    #[test]
    fn the_schemas_own_compile_options_win() {
        let strict = with_defaults(&json!({"x-guidance": {"coerce_one_of": false}}));
        assert_eq!(strict["x-guidance"]["coerce_one_of"], false);
        assert!(strict["x-guidance"]["whitespace_pattern"].is_string());
        assert!(with_defaults(&json!(true))["anyOf"].is_array(), "any value, bounded");
    }
}
