//! Tool calls in Gemma 4's format, on the synthetic Gemma 4 file, which
//! has no chat template (Baton's Gemma 4 fallback renders its turns and
//! the tools' declarations): a required or named call is held to the
//! tools' grammar (`<|tool_call>call:NAME{key:<|"|>value<|"|>}<tool_call|>`)
//! and comes back as OpenAI `tool_calls`, whole and streamed alike, and
//! as a Responses `function_call`; with `parallel_tool_calls` several; an
//! `"auto"` answer is words or a call held once opened.

use baton_serve::http::ServerOptions;
use baton_synth::SynthShape;
use serde_json::{json, Value};

use crate::call_kit::*;
use crate::server::*;

fn server() -> Server {
    let options = ServerOptions { body_limit: BODY_LIMIT, ..ServerOptions::default() };
    Server::start_shape(SynthShape::Gemma4, 1024, options)
}

#[test]
fn a_required_gemma4_call_is_held_to_the_tools_and_read_as_tool_calls_whole_and_streamed() {
    assert_required_and_named_calls(&server());
}

#[test]
fn parallel_gemma4_calls_each_fit_their_tool() {
    assert_parallel_calls(&server());
}

#[test]
fn a_required_gemma4_call_is_a_responses_function_call() {
    checked(&responses_required_call(&server(), &tools()));
}

#[test]
fn an_auto_gemma4_answer_is_words_or_a_held_call_whole_and_streamed_alike() {
    let server = server();
    for seed in [1, 2, 3, 4] {
        let request = request(json!("auto"), seed);
        let (status, body) = server.post("/v1/chat/completions", &request);
        assert_eq!(status, 200, "{body}");
        let choice = &body["choices"][0];
        let (delta_calls, finish) = streamed_tool_calls(&server, &request);
        assert_eq!(choice["finish_reason"], finish.as_str(), "seed {seed}");
        match choice["message"]["tool_calls"].as_array() {
            Some(calls) => {
                assert_eq!(choice["finish_reason"], "tool_calls", "{body}");
                calls.iter().for_each(|c| drop(checked(c)));
                assert_eq!(delta_calls.len(), calls.len(), "seed {seed}");
            }
            None => {
                assert_ne!(choice["finish_reason"], "tool_calls", "{body}");
                assert!(delta_calls.is_empty(), "seed {seed}: {delta_calls:?}");
            }
        }
    }
}

/// Earlier calls and their results are written back in Gemma 4's own
/// format, in the model's turn (a result named after the call it answers),
/// and the answer after them opens a new model turn; a chat request with
/// that history is answered.
#[test]
fn earlier_gemma4_calls_and_results_are_written_in_the_model_turn() {
    let server = server();
    let messages = json!([
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 3, \"sky\": \"clear\"}"},
    ]);
    let (status, body) = server.post("/apply-template", &json!({"messages": messages}));
    assert_eq!(status, 200, "{body}");
    let q = "<|\"|>";
    let turn = format!(
        "<|turn>model\n<|tool_call>call:get_weather{{city:{q}Oslo{q}}}<tool_call|>\
         <|tool_response>response:get_weather{{sky:{q}clear{q},temp:3}}<tool_response|><turn|>\n<|turn>model\n"
    );
    let prompt = body["prompt"].as_str().expect("prompt");
    assert!(prompt.ends_with(&turn), "{prompt}");
    let request = json!({"messages": messages, "tools": tools(), "max_tokens": 8, "seed": 1});
    let (status, body) = server.post("/v1/chat/completions", &request);
    assert_eq!(status, 200, "{body}");
}

/// The `auto` path end to end: a logit bias toward `<|tool_call>` makes
/// the synthetic model open a call by itself (its weights are random); the
/// lazy hold then keeps the call to the tools' grammar, and it comes back
/// as `tool_calls` that fit their tool, whole and streamed alike.
#[test]
fn an_auto_gemma4_answer_that_opens_a_call_is_held_and_read_as_tool_calls() {
    let server = server();
    let (status, body) = server.post("/tokenize", &json!({"content": "<|tool_call>"}));
    assert_eq!(status, 200, "{body}");
    let open = body["tokens"][0].as_u64().expect("the opening's id");
    assert_eq!(body["tokens"].as_array().map(Vec::len), Some(1), "one token: {body}");
    for seed in [1, 2, 3] {
        let mut request = request(json!("auto"), seed);
        request["logit_bias"] = json!([[open, 100]]);
        let (status, body) = server.post("/v1/chat/completions", &request);
        assert_eq!(status, 200, "{body}");
        let choice = &body["choices"][0];
        assert_eq!(choice["finish_reason"], "tool_calls", "seed {seed}: the biased answer calls: {body}");
        let calls = choice["message"]["tool_calls"].as_array().expect("tool_calls");
        assert_eq!(calls.len(), 1, "one call without parallel_tool_calls: {body}");
        checked(&calls[0]);
        let (delta_calls, finish) = streamed_tool_calls(&server, &request);
        assert_eq!(finish, "tool_calls", "seed {seed}");
        let streamed: Vec<&Value> = delta_calls.iter().map(|c| &c["function"]).collect();
        assert_eq!(streamed, [&calls[0]["function"]], "seed {seed}: streamed as whole");
    }
}
