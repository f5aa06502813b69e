//! The tools the tests of models' own call formats offer (harmony's,
//! Gemma 4's), the check of a call against them, and the test of required
//! and named calls every format passes.

use serde_json::{json, Value};

use crate::server::*;

/// Two tools: `get_weather` (a `city` of two, an optional integer `days`)
/// and `get_time` (a `zone` of two).
pub(crate) fn tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "description": "The weather of a city",
            "parameters": {"type": "object", "properties": {
                "city": {"enum": ["Oslo", "Lima"]}, "days": {"type": "integer"}}, "required": ["city"]}}},
        {"type": "function", "function": {"name": "get_time",
            "parameters": {"type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}}, "required": ["zone"]}}},
    ])
}

/// A chat request offering [`tools`] with `choice`, sampled with `seed`.
pub(crate) fn request(choice: Value, seed: u64) -> Value {
    json!({"messages": [{"role": "user", "content": "Weather in Oslo?"}], "tools": tools(), "tool_choice": choice,
        "max_tokens": 400, "temperature": 1.0, "seed": seed})
}

/// The call's name, checking its arguments against that tool's schema.
pub(crate) fn checked(call: &Value) -> String {
    let name = call["function"]["name"].as_str().expect("a name").to_string();
    let arguments: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().expect("arguments as JSON text")).expect("JSON");
    let ok = match name.as_str() {
        "get_weather" => {
            ["Oslo", "Lima"].contains(&arguments["city"].as_str().unwrap_or(""))
                && arguments.get("days").is_none_or(Value::is_i64)
                && arguments.as_object().is_some_and(|o| o.keys().all(|k| k == "city" || k == "days"))
        }
        "get_time" => ["UTC", "CET"].contains(&arguments["zone"].as_str().unwrap_or("")),
        _ => false,
    };
    assert!(ok, "{call}");
    name
}

/// `tool_choice: "required"` and a named function each give one call
/// that fits its tool (the named one), read as `tool_calls` whole and the
/// same streamed.
pub(crate) fn assert_required_and_named_calls(server: &Server) {
    for (choice, only) in
        [(json!("required"), None), (json!({"type": "function", "function": {"name": "get_time"}}), Some("get_time"))]
    {
        let request = request(choice, 5);
        let (status, body) = server.post("/v1/chat/completions", &request);
        assert_eq!(status, 200, "{body}");
        let choice0 = &body["choices"][0];
        assert_eq!(choice0["finish_reason"], "tool_calls", "{body}");
        let calls = choice0["message"]["tool_calls"].as_array().expect("tool_calls");
        assert_eq!(calls.len(), 1, "{body}");
        let name = checked(&calls[0]);
        if let Some(only) = only {
            assert_eq!(name, only, "the named function");
        }
        let (delta_calls, finish) = streamed_tool_calls(server, &request);
        assert_eq!(delta_calls.len(), 1, "{delta_calls:?}");
        assert_eq!(delta_calls[0]["function"], calls[0]["function"], "streamed as whole");
        assert_eq!(finish, "tool_calls");
    }
}

/// `tool_choice: "required"` with `parallel_tool_calls`: one to eight
/// calls, each fitting its tool (the whole ones where `max_tokens` cut a
/// later one), streamed as whole.
pub(crate) fn assert_parallel_calls(server: &Server) {
    for seed in [1, 2, 3] {
        let mut request = request(json!("required"), seed);
        request["parallel_tool_calls"] = json!(true);
        let (status, body) = server.post("/v1/chat/completions", &request);
        assert_eq!(status, 200, "{body}");
        let choice = &body["choices"][0];
        match choice["finish_reason"].as_str() {
            Some("tool_calls") => {}
            Some("length") => assert!(choice["message"]["tool_calls"].is_array(), "{body}"),
            other => panic!("{other:?}: {body}"),
        }
        let calls = choice["message"]["tool_calls"].as_array().expect("tool_calls");
        assert!(!calls.is_empty() && calls.len() <= 8, "{body}");
        calls.iter().for_each(|c| drop(checked(c)));
        let (delta_calls, _) = streamed_tool_calls(server, &request);
        let whole: Vec<&Value> = calls.iter().map(|c| &c["function"]).collect();
        let streamed: Vec<&Value> = delta_calls.iter().map(|c| &c["function"]).collect();
        assert_eq!(streamed, whole, "seed {seed}: streamed as whole");
    }
}
