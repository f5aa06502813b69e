//! Tool calls in the XML form Qwen 3.5 and 3.6 were trained on, on a
//! synthetic qwen35 file and a ChatML template written here that teaches
//! the form (as those models' templates do: `<function=…>` and
//! `<parameter=…>`): a required or named call is held to the tools'
//! grammar and comes back as OpenAI `tool_calls` whole and streamed, its
//! values typed by the tools' schemas (`days` an integer, `city` a
//! string); with `parallel_tool_calls` several; an `"auto"` answer is
//! words or a held call; earlier calls go back into the conversation in
//! the same form.

use baton_serve::http::ServerOptions;
use baton_synth::SynthShape;
use serde_json::json;

use crate::call_kit::*;
use crate::server::*;

/// ChatML turns; its comment names the call form, as Qwen 3.5's template
/// teaches it.
const XML_TEMPLATE: &str = "{#- calls: <tool_call> <function=NAME> <parameter=KEY> value </parameter> </function> -#}\
{%- for message in messages -%}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}\
{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

fn server() -> Server {
    let options = ServerOptions {
        body_limit: BODY_LIMIT,
        chat_template: Some(XML_TEMPLATE.to_string()),
        ..ServerOptions::default()
    };
    Server::start_shape(SynthShape::Qwen35, 1024, options)
}

#[test]
fn a_required_xml_call_is_held_to_the_tools_and_read_as_tool_calls_whole_and_streamed() {
    assert_required_and_named_calls(&server());
}

#[test]
fn parallel_xml_calls_each_fit_their_tool_and_stream_as_whole() {
    assert_parallel_calls(&server());
}

#[test]
fn an_auto_xml_answer_is_words_or_a_held_call_whole_and_streamed_alike() {
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
                calls.iter().for_each(|c| drop(checked(c)));
                assert_eq!(delta_calls.len(), calls.len(), "seed {seed}");
            }
            None => assert!(delta_calls.is_empty(), "seed {seed}: {delta_calls:?}"),
        }
    }
}

/// The tools are described in the XML form, and earlier calls are written
/// back in it, their results in `<tool_response>` tags of a user turn.
#[test]
fn earlier_xml_calls_are_written_in_their_form() {
    let server = server();
    let messages = json!([
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\",\"days\":2}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 3}"},
    ]);
    let (status, body) = server.post("/apply-template", &json!({"messages": messages}));
    assert_eq!(status, 200, "{body}");
    let prompt = body["prompt"].as_str().expect("prompt");
    let call = "<|im_start|>assistant\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n\
                <parameter=days>\n2\n</parameter>\n</function>\n</tool_call><|im_end|>\n\
                <|im_start|>user\n<tool_response>\n{\"temp\": 3}\n</tool_response><|im_end|>\n";
    assert!(prompt.contains(call), "{prompt}");
    let request =
        json!({"messages": messages, "tools": tools(), "tool_choice": "required", "max_tokens": 200, "seed": 1});
    let (status, body) = server.post("/v1/chat/completions", &request);
    assert_eq!(status, 200, "{body}");
    checked(&body["choices"][0]["message"]["tool_calls"][0]);
}
