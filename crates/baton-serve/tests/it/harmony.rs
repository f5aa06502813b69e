//! Tool calls in gpt-oss's harmony format, on a synthetic gpt-oss file
//! and a harmony-style template written here: a required or named call
//! opens on the commentary channel and is held to the tools' grammar
//! (`to=functions.NAME <|constrain|>json<|message|>{…}`), and comes back
//! as OpenAI `tool_calls` (whole and streamed) and as a Responses
//! `function_call`; with `"auto"` the answer goes free and is text unless
//! it is a call.

use baton_serve::http::ServerOptions;
use baton_synth::SynthShape;
use serde_json::json;

use crate::call_kit::*;
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

#[test]
fn a_required_harmony_call_is_held_to_the_tools_and_read_as_tool_calls_whole_and_streamed() {
    assert_required_and_named_calls(&server());
}

#[test]
fn a_required_harmony_call_is_a_responses_function_call() {
    checked(&responses_required_call(&server(), &tools()));
}

#[test]
fn an_auto_harmony_answer_goes_free_and_is_text_unless_it_is_a_call() {
    let server = server();
    let (status, body) = server.post("/v1/chat/completions", &request(json!("auto"), 5));
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
