//! llama-server's token texts in `logit_bias`: an object key, or the first
//! item of a `[key, bias]` pair, that is a text rather than a token id
//! biases every token the text tokenizes to (without special tokens), as
//! llama-server does. The texts are turned into ids before the bias is
//! checked (`params.rs`), so the ids' checks apply to them too.

use baton_model::{EncodeOptions, Tokenizer};
use serde_json::{json, Value};

use super::error::ApiError;

/// `value` with its token texts replaced by the ids they tokenize to, as
/// `[id, bias]` pairs; `None` when it names no text (or is not a bias
/// object or list of pairs: the check refuses it then).
pub fn with_texts_as_ids(value: &Value, tokenizer: &Tokenizer) -> Result<Option<Value>, ApiError> {
    let pairs: Vec<(Value, Value)> = match value {
        // A key that reads as an integer is an id (a negative one is then
        // refused as such); any other key is a text.
        Value::Object(map) => map
            .iter()
            .map(|(key, bias)| match key.parse::<i64>() {
                Ok(id) => (json!(id), bias.clone()),
                Err(_) => (json!(key), bias.clone()),
            })
            .collect(),
        Value::Array(items) => {
            let pairs: Option<Vec<_>> = items
                .iter()
                .map(|pair| match pair.as_array().map(Vec::as_slice) {
                    Some([key, bias]) => Some((key.clone(), bias.clone())),
                    _ => None,
                })
                .collect();
            match pairs {
                Some(pairs) => pairs,
                None => return Ok(None),
            }
        }
        _ => return Ok(None),
    };
    if !pairs.iter().any(|(key, _)| key.is_string()) {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(pairs.len());
    for (key, bias) in pairs {
        match key {
            Value::String(text) => {
                let options = EncodeOptions { add_special: false, parse_special: false };
                let ids = tokenizer.encode(&text, options).map_err(|e| {
                    ApiError::invalid_param("logit_bias", format!("tokenizing the logit_bias text {text:?}: {e}"))
                })?;
                out.extend(ids.into_iter().map(|id| json!([id, bias])));
            }
            id => out.push(json!([id, bias])),
        }
    }
    Ok(Some(Value::Array(out)))
}
