//! The JSON files the reference scripts write (tests/reference/
//! tokenizer_ref.py and tokenizer_llama_ref.py): reading them and the
//! tokenizer configuration they hold.
#![cfg(any(feature = "reference-tests", feature = "llama-reference-tests"))]

use baton_tokenizer::{Tokenizer, TokenizerConfig};
use serde_json::Value;

/// The JSON at the path in the environment variable `var`, which `script`
/// writes; a clear panic when it is unset or unreadable.
pub(crate) fn load_json(var: &str, script: &str) -> Value {
    let path = std::env::var(var)
        .unwrap_or_else(|_| panic!("{var} is not set: point it at the JSON written by {script} (see its docs)"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {var}={path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path} is not valid JSON: {e}"))
}

pub(crate) fn strings(v: &Value) -> Vec<String> {
    v.as_array().expect("an array of strings").iter().map(|s| s.as_str().expect("a string").to_owned()).collect()
}

pub(crate) fn id(v: &Value) -> Option<u32> {
    v.as_u64().map(|n| u32::try_from(n).expect("id fits u32"))
}

pub(crate) fn ids(v: &Value) -> Vec<u32> {
    v.as_array().expect("ids").iter().map(|v| id(v).expect("id")).collect()
}

/// The tokenizer configuration of the JSON's `config` object.
pub(crate) fn config_from_json(json: &Value) -> TokenizerConfig {
    TokenizerConfig {
        model: json["model"].as_str().expect("model").to_owned(),
        pre: json["pre"].as_str().map(str::to_owned),
        tokens: strings(&json["tokens"]),
        scores: None,
        token_types: Some(
            json["token_types"]
                .as_array()
                .expect("token_types")
                .iter()
                .map(|t| i32::try_from(t.as_i64().expect("int")).expect("i32"))
                .collect(),
        ),
        merges: Some(strings(&json["merges"])),
        bos_id: id(&json["bos_id"]),
        eos_id: id(&json["eos_id"]),
        unk_id: id(&json["unk_id"]),
        pad_id: id(&json["pad_id"]),
        add_bos: json["add_bos"].as_bool(),
        add_eos: json["add_eos"].as_bool(),
        add_space_prefix: None,
    }
}

/// Where `actual` first differs from `expected`, and both around there as
/// `id:"text"` lists, for a failure message.
pub(crate) fn first_difference(tokenizer: &Tokenizer, expected: &[u32], actual: &[u32]) -> (usize, String, String) {
    let at = actual.iter().zip(expected).take_while(|(a, e)| a == e).count();
    let show = |ids: &[u32]| {
        ids.iter()
            .skip(at.saturating_sub(2))
            .take(8)
            .map(|&i| format!("{i}:{:?}", tokenizer.token_text(i).unwrap_or("?")))
            .collect::<Vec<_>>()
            .join(" ")
    };
    (at, show(expected), show(actual))
}
