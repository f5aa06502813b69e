//! `tools` on `/v1/chat/completions`: a required or named call comes back
//! as `tool_calls` whose arguments follow the tool's parameters, whole and
//! streamed; `auto` answers in words or a call; `none` leaves the tools
//! out; earlier calls and their results render; parameters with
//! `pattern`, `minimum` and `oneOf` are held; bad tools get 400.

use serde_json::{json, Value};

use crate::server::*;

fn tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "description": "The weather of a city",
            "parameters": {"type": "object", "properties": {
                "city": {"type": "string", "maxLength": 12},
                "unit": {"enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"], "additionalProperties": false}}},
        {"type": "function", "function": {"name": "get_time",
            "parameters": {"type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}},
            "required": ["zone"], "additionalProperties": false}}},
    ])
}

/// The name and parsed arguments of a whole answer's call, checked
/// against the tools.
fn check_call(call: &Value) -> (String, Value) {
    assert_eq!(call["type"], "function", "{call}");
    assert!(call["id"].as_str().is_some_and(|id| id.starts_with("call_")), "{call}");
    let name = call["function"]["name"].as_str().expect("name").to_string();
    let arguments = call["function"]["arguments"].as_str().expect("arguments are a JSON text");
    let arguments: Value = serde_json::from_str(arguments).unwrap_or_else(|e| panic!("{arguments}: {e}"));
    match name.as_str() {
        "get_weather" => {
            assert!(arguments["city"].as_str().is_some_and(|c| c.chars().count() <= 12), "{arguments}");
            assert!(["celsius", "fahrenheit"].contains(&arguments["unit"].as_str().expect("unit")), "{arguments}");
            assert_eq!(arguments.as_object().map(|o| o.len()), Some(2), "{arguments}");
        }
        "get_time" => assert!(["UTC", "CET"].contains(&arguments["zone"].as_str().expect("zone")), "{arguments}"),
        other => panic!("no tool is named {other}"),
    }
    (name, arguments)
}

/// The call a stream sent (one delta holds it) and its finish reason.
fn streamed_call(events: &[String]) -> (Option<Value>, String, String) {
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"), "{events:?}");
    let (mut call, mut finish, mut text) = (None, String::new(), String::new());
    for event in &events[..events.len() - 1] {
        let chunk: Value = serde_json::from_str(event).expect("a chunk is JSON");
        let Some(choice) = chunk["choices"].get(0) else { continue };
        if let Some(calls) = choice["delta"]["tool_calls"].as_array() {
            assert!(call.is_none(), "one call delta: {events:?}");
            assert_eq!(calls.len(), 1);
            assert_eq!(calls[0]["index"], 0);
            call = Some(calls[0].clone());
        }
        text.push_str(choice["delta"]["content"].as_str().unwrap_or(""));
        if let Some(reason) = choice["finish_reason"].as_str() {
            finish = reason.to_string();
        }
    }
    (call, finish, text)
}

#[test]
fn required_and_named_calls_follow_the_tools() {
    let server = Server::start(2, 8, 1024);
    let mut calls = 0;
    for (seed, choice) in [json!("required"), json!({"type": "function", "function": {"name": "get_time"}})]
        .into_iter()
        .cycle()
        .take(6)
        .enumerate()
    {
        let request = json!({
            "messages": [{"role": "user", "content": "weather in Oslo?"}],
            "tools": tools(), "tool_choice": choice, "max_tokens": 96, "temperature": 0.7, "seed": seed,
        });
        let (status, body) = server.post("/v1/chat/completions", &request);
        assert_eq!(status, 200, "{body}");
        let answer = &body["choices"][0];
        let finish = answer["finish_reason"].as_str().expect("finish");
        let whole = if finish == "tool_calls" {
            calls += 1;
            assert!(answer["message"].get("content").is_none_or(Value::is_null), "{answer}");
            let listed = answer["message"]["tool_calls"].as_array().expect("tool_calls");
            assert_eq!(listed.len(), 1, "{answer}");
            let (name, _) = check_call(&listed[0]);
            if choice.is_object() {
                assert_eq!(name, "get_time", "the named tool is called");
            }
            Some(listed[0]["function"].clone())
        } else {
            assert_eq!(finish, "length", "{answer}");
            None
        };
        let mut streamed = request.clone();
        streamed["stream"] = json!(true);
        let (status, events) = server.stream("/v1/chat/completions", &streamed);
        assert_eq!(status, 200);
        let (call, stream_finish, _) = streamed_call(&events);
        assert_eq!(stream_finish, finish, "streamed as whole");
        assert_eq!(call.map(|c| c["function"].clone()), whole, "streamed as whole");
    }
    assert!(calls > 0, "no call closed within 96 tokens");
}

#[test]
fn auto_answers_in_words_or_a_call_and_none_leaves_the_tools_out() {
    let server = Server::start(1, 4, 1024);
    let ask = |extra: Value| {
        let mut request = json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 16, "temperature": 0});
        request.as_object_mut().expect("object").extend(extra.as_object().expect("object").clone());
        let (status, body) = server.post("/v1/chat/completions", &request);
        assert_eq!(status, 200, "{body}");
        body
    };
    let plain = ask(json!({}));
    let none = ask(json!({"tools": tools(), "tool_choice": "none"}));
    let auto = ask(json!({"tools": tools()}));
    let prompt = |body: &Value| body["usage"]["prompt_tokens"].as_u64().expect("prompt tokens");
    assert_eq!(prompt(&none), prompt(&plain), "none leaves the tools out");
    assert_eq!(none["choices"][0]["message"], plain["choices"][0]["message"]);
    assert!(prompt(&auto) > prompt(&plain) + 50, "the tools are described to the model");
    let answer = &auto["choices"][0];
    match answer["finish_reason"].as_str() {
        Some("tool_calls") => drop(check_call(&answer["message"]["tool_calls"][0])),
        _ => assert!(answer["message"]["content"].is_string(), "{answer}"),
    }
    // A conversation that called a tool and carries its result.
    let turns = json!({"tools": tools(), "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "weather in Oslo?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"unit\": \"celsius\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temperature\": 3}"},
    ]});
    let answer = ask(turns);
    assert!(prompt(&answer) > prompt(&auto), "{answer}");
}

#[test]
fn bad_tools_get_400_and_the_server_keeps_serving() {
    let server = Server::start(1, 4, 512);
    let weather = tools()[0].clone();
    let messages = json!([{"role": "user", "content": "x"}]);
    for (what, request, param) in [
        ("tools not a list", json!({"tools": {"a": 1}}), "tools"),
        ("a tool without a function", json!({"tools": [{"type": "function"}]}), "tools"),
        ("a tool of another type", json!({"tools": [{"type": "retrieval", "function": {"name": "a"}}]}), "tools"),
        ("a bad name", json!({"tools": [{"type": "function", "function": {"name": "a b"}}]}), "tools"),
        (
            "parameters that are no schema",
            json!({"tools": [{"type": "function", "function": {"name": "a", "parameters": 3}}]}),
            "tools",
        ),
        ("two tools of one name", json!({"tools": [weather, weather]}), "tools"),
        (
            "parameters that cannot be held",
            json!({"tools": [{"type": "function", "function": {"name": "a", "parameters": {"type": "string", "pattern": "a("}}}]}),
            "tools",
        ),
        ("an unknown choice", json!({"tools": [weather], "tool_choice": "always"}), "tool_choice"),
        (
            "a choice of no tool",
            json!({"tools": [weather], "tool_choice": {"type": "function", "function": {"name": "nope"}}}),
            "tool_choice",
        ),
        ("required without tools", json!({"tool_choice": "required"}), "tool_choice"),
        ("a choice of the wrong type", json!({"tools": [weather], "tool_choice": 3}), "tool_choice"),
        (
            "tools beside a JSON format",
            json!({"tools": [weather], "response_format": {"type": "json_object"}}),
            "response_format",
        ),
        (
            "calls on a user message",
            json!({"messages": [{"role": "user", "content": "x", "tool_calls": []}]}),
            "messages",
        ),
        (
            "calls that are not a list",
            json!({"messages": [{"role": "assistant", "content": "x", "tool_calls": 3}, {"role": "user", "content": "y"}]}),
            "messages",
        ),
    ] {
        let mut request = request;
        if request.get("messages").is_none() {
            request["messages"] = messages.clone();
        }
        let (status, body) = server.post("/v1/chat/completions", &request);
        error_of(status, &body, 400, what);
        assert_eq!(body["error"]["param"], param, "{what}: {body}");
    }
    // A schema llguidance cannot compile is named by its tool, in the
    // schema's own words.
    let tools = json!([weather, {"type": "function", "function": {"name": "lookup",
        "parameters": {"type": "object", "properties": {"q": {"type": "string", "pattern": "a("}}}}}]);
    let (status, body) = server.post("/v1/chat/completions", &json!({"messages": messages, "tools": tools}));
    error_of(status, &body, 400, "a pattern that is no regular expression");
    let message = body["error"]["message"].as_str().expect("message");
    assert!(message.contains("function \"lookup\"") && message.contains("unclosed group"), "{body}");
    assert!(!message.contains("%json"), "not the calls' grammar: {body}");
    let (status, _) = server.post("/v1/chat/completions", &json!({"messages": messages, "max_tokens": 2}));
    assert_eq!(status, 200);
}

/// A tool whose parameters use what pydantic writes (`Field(ge=0)` as
/// `minimum`, a `pattern`, a `date-time`, a discriminated union as
/// `oneOf` over `$defs`) is served, and its calls' arguments follow them.
#[test]
fn parameters_with_pattern_minimum_and_one_of_are_held() {
    use baton_gen::constraint::INTEGER_BOUND;
    use baton_testkit::schemas::{pydantic_record, pydantic_record_check};
    let server = Server::start(2, 8, 2048);
    let record = json!([{"type": "function", "function": {"name": "record", "parameters": pydantic_record()}}]);
    let named = json!({"type": "function", "function": {"name": "record"}});
    let mut closed = 0;
    for (seed, choice) in [named.clone(), json!("required"), named, json!("auto")].into_iter().enumerate() {
        let request = json!({
            "messages": [{"role": "user", "content": "file a record"}],
            "tools": record, "tool_choice": choice, "max_tokens": 320, "temperature": 0.8, "seed": seed,
        });
        let (status, body) = server.post("/v1/chat/completions", &request);
        assert_eq!(status, 200, "{body}");
        let answer = &body["choices"][0];
        if answer["finish_reason"] != "tool_calls" {
            continue;
        }
        closed += 1;
        let call = &answer["message"]["tool_calls"][0]["function"];
        assert_eq!(call["name"], "record", "{answer}");
        let arguments = call["arguments"].as_str().expect("arguments are a JSON text");
        let arguments: Value = serde_json::from_str(arguments).unwrap_or_else(|e| panic!("{arguments}: {e}"));
        pydantic_record_check(&arguments, INTEGER_BOUND).unwrap_or_else(|why| panic!("{why}: {arguments}"));
    }
    assert!(closed >= 2, "only {closed} of 4 calls closed within 320 tokens");
}
