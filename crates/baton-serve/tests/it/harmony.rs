//! Tool calls in gpt-oss's harmony format, on a synthetic gpt-oss file
//! and a harmony-style template written here: a required or named call
//! opens on the commentary channel and is held to the tools' grammar
//! (`to=functions.NAME <|constrain|>json<|message|>{…}`), and comes back
//! as OpenAI `tool_calls` (whole and streamed) and as a Responses
//! `function_call`; with `"auto"` the answer goes free and is text unless
//! it is a call.

use baton_serve::http::ServerOptions;
use baton_synth::SynthShape;
use serde_json::{json, Value};

use crate::server::*;

/// Harmony's message layout: each message in `<|start|>ROLE…<|end|>`, the
/// assistant's on the final channel, the generation prompt the
/// assistant's header (the model writes the channel).
const HARMONY_TEMPLATE: &str = "{%- for message in messages -%}\
{%- if message['role'] == 'assistant' -%}<|start|>assistant<|channel|>final<|message|>{{ message['content'] }}<|end|>\
{%- else -%}<|start|>{{ message['role'] }}<|message|>{{ message['content'] }}<|end|>{%- endif -%}\
{%- endfor -%}{%- if add_generation_prompt -%}<|start|>assistant{%- endif -%}";

fn server() -> Server {
    let options = ServerOptions {
        body_limit: BODY_LIMIT,
        chat_template: Some(HARMONY_TEMPLATE.to_string()),
        ..ServerOptions::default()
    };
    Server::start_shape(SynthShape::GptOss, 1024, options)
}

fn tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "description": "The weather of a city",
            "parameters": {"type": "object", "properties": {"city": {"enum": ["Oslo", "Lima"]}}, "required": ["city"]}}},
        {"type": "function", "function": {"name": "get_time",
            "parameters": {"type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}}, "required": ["zone"]}}},
    ])
}

fn request(choice: Value) -> Value {
    json!({"messages": [{"role": "user", "content": "Weather in Oslo?"}], "tools": tools(), "tool_choice": choice,
        "max_tokens": 400, "temperature": 1.0, "seed": 5})
}

/// The call's name, checking its arguments against that tool's enum.
fn checked(call: &Value) -> String {
    let name = call["function"]["name"].as_str().expect("a name").to_string();
    let arguments: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().expect("arguments as JSON text")).expect("JSON");
    let ok = match name.as_str() {
        "get_weather" => ["Oslo", "Lima"].contains(&arguments["city"].as_str().unwrap_or("")),
        "get_time" => ["UTC", "CET"].contains(&arguments["zone"].as_str().unwrap_or("")),
        _ => false,
    };
    assert!(ok, "{call}");
    name
}

#[test]
fn a_required_harmony_call_is_held_to_the_tools_and_read_as_tool_calls_whole_and_streamed() {
    let server = server();
    for (choice, only) in
        [(json!("required"), None), (json!({"type": "function", "function": {"name": "get_time"}}), Some("get_time"))]
    {
        let (status, body) = server.post("/v1/chat/completions", &request(choice.clone()));
        assert_eq!(status, 200, "{body}");
        let choice0 = &body["choices"][0];
        assert_eq!(choice0["finish_reason"], "tool_calls", "{body}");
        let calls = choice0["message"]["tool_calls"].as_array().expect("tool_calls");
        assert_eq!(calls.len(), 1, "{body}");
        let name = checked(&calls[0]);
        if let Some(only) = only {
            assert_eq!(name, only, "the named function");
        }
        // Streamed: the same call in a tool_calls delta.
        let mut streamed = request(choice);
        streamed["stream"] = json!(true);
        let (status, events) = server.stream("/v1/chat/completions", &streamed);
        assert_eq!(status, 200);
        let chunks: Vec<Value> =
            events[..events.len() - 1].iter().map(|e| serde_json::from_str(e).expect("JSON")).collect();
        let delta_calls: Vec<&Value> =
            chunks.iter().filter_map(|c| c["choices"][0]["delta"]["tool_calls"].as_array()).flatten().collect();
        assert_eq!(delta_calls.len(), 1, "{events:?}");
        assert_eq!(delta_calls[0]["function"], calls[0]["function"], "streamed as whole");
        let last = chunks.last().expect("chunks");
        assert_eq!(last["choices"][0]["finish_reason"], "tool_calls", "{last}");
    }
}

#[test]
fn a_required_harmony_call_is_a_responses_function_call() {
    let server = server();
    let tools: Vec<Value> = tools()
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| {
            let mut flat = t["function"].clone();
            flat["type"] = json!("function");
            flat
        })
        .collect();
    let input = json!({"input": "Weather in Oslo?", "tools": tools, "tool_choice": "required",
        "max_output_tokens": 400, "temperature": 1.0, "seed": 5});
    let (status, body) = server.post("/v1/responses", &input);
    assert_eq!(status, 200, "{body}");
    let call = body["output"].as_array().expect("output").iter().find(|item| item["type"] == "function_call");
    let call = call.unwrap_or_else(|| panic!("no function_call: {body}"));
    checked(&json!({"function": {"name": call["name"], "arguments": call["arguments"]}}));
}

#[test]
fn an_auto_harmony_answer_goes_free_and_is_text_unless_it_is_a_call() {
    let server = server();
    let (status, body) = server.post("/v1/chat/completions", &request(json!("auto")));
    assert_eq!(status, 200, "{body}");
    let choice = &body["choices"][0];
    match choice["message"]["tool_calls"].as_array() {
        Some(calls) => {
            assert_eq!(choice["finish_reason"], "tool_calls", "{body}");
            calls.iter().for_each(|c| drop(checked(c)));
        }
        None => {
            assert_ne!(choice["finish_reason"], "tool_calls", "{body}");
            let said = format!("{}{}", choice["message"]["content"], choice["message"]["reasoning_content"]);
            assert!(said.len() > 4, "the free answer says something: {body}");
        }
    }
}
