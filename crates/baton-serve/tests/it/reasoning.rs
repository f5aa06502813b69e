//! `reasoning_content`: with a template whose generation prompt opens the
//! thinking (`<think>`, as DeepSeek-R1's), the answer's thinking comes
//! back in `message.reasoning_content` (streamed as
//! `delta.reasoning_content`), not in `content`; `--reasoning-format none`
//! leaves it in `content`; an answer without thinking has no
//! `reasoning_content`; the Messages and Responses answers carry the same
//! thinking as `thinking` blocks and `reasoning` items.

use serde_json::{json, Value};

use baton_serve::http::{ReasoningFormat, ServerOptions};

use crate::server::*;

/// ChatML whose generation prompt opens the thinking.
const THINKING_TEMPLATE: &str = "{% for message in messages %}\
{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}\
{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n<think>\\n' }}{% endif %}";

fn server(format: ReasoningFormat, template: Option<&str>) -> Server {
    let options = ServerOptions {
        body_limit: BODY_LIMIT,
        reasoning_format: format,
        chat_template: template.map(str::to_string),
        ..ServerOptions::default()
    };
    Server::start_with(1, 4, 1024, options)
}

fn request() -> Value {
    json!({"messages": [{"role": "user", "content": "why?"}], "max_tokens": 12, "ignore_eos": true,
        "temperature": 1.0, "seed": 9})
}

#[test]
fn thinking_the_prompt_opened_comes_back_as_reasoning_content_whole_and_streamed() {
    let thinking = server(ReasoningFormat::Deepseek, Some(THINKING_TEMPLATE));
    let (status, body) = thinking.post("/v1/chat/completions", &request());
    assert_eq!(status, 200, "{body}");
    let message = &body["choices"][0]["message"];
    let reasoning = message["reasoning_content"].as_str().expect("reasoning_content");
    assert!(!reasoning.is_empty(), "{body}");
    assert_eq!(message["content"], "", "never closed, all of it is thinking: {body}");
    // Streamed: the same thinking, as reasoning_content deltas.
    let mut streamed = request();
    streamed["stream"] = json!(true);
    let (status, events) = thinking.stream("/v1/chat/completions", &streamed);
    assert_eq!(status, 200);
    let (mut thought, mut said) = (String::new(), String::new());
    for event in &events[..events.len() - 1] {
        let chunk: Value = serde_json::from_str(event).expect("JSON");
        let delta = &chunk["choices"][0]["delta"];
        thought.push_str(delta["reasoning_content"].as_str().unwrap_or(""));
        said.push_str(delta["content"].as_str().unwrap_or(""));
    }
    assert_eq!((thought.as_str(), said.as_str()), (reasoning, ""), "streamed as whole");
    // --reasoning-format none: the same text, in content.
    let plain = server(ReasoningFormat::None, Some(THINKING_TEMPLATE));
    let (status, body) = plain.post("/v1/chat/completions", &request());
    assert_eq!(status, 200, "{body}");
    let message = &body["choices"][0]["message"];
    assert!(message.get("reasoning_content").is_none(), "{body}");
    assert_eq!(message["content"].as_str().map(str::trim_start), Some(reasoning), "{body}");
}

#[test]
fn an_answer_without_thinking_has_no_reasoning_content() {
    let server = server(ReasoningFormat::Deepseek, None);
    let (status, body) = server.post("/v1/chat/completions", &request());
    assert_eq!(status, 200, "{body}");
    let message = &body["choices"][0]["message"];
    assert!(message.get("reasoning_content").is_none(), "{body}");
    assert!(message["content"].as_str().is_some_and(|c| !c.is_empty()), "{body}");
}

/// The chat answer's `reasoning_content` and `content` for `seed`, and
/// the Messages body of the same request.
fn three_ways(server: &Server, seed: u64) -> (String, String, Value) {
    let chat = json!({"messages": [{"role": "user", "content": "why?"}], "max_tokens": 16, "temperature": 1.0,
        "seed": seed});
    let (status, body) = server.post("/v1/chat/completions", &chat);
    assert_eq!(status, 200, "{body}");
    let message = &body["choices"][0]["message"];
    let reasoning = message["reasoning_content"].as_str().unwrap_or("").to_string();
    let content = message["content"].as_str().unwrap_or("").to_string();
    let same = json!({"max_tokens": 16, "temperature": 1.0, "seed": seed,
        "messages": [{"role": "user", "content": "why?"}]});
    (reasoning, content, same)
}

/// Anthropic `thinking` blocks and Responses `reasoning` items carry the
/// thinking that chat completions give as `reasoning_content`, whole and
/// streamed (`thinking_delta`; `response.reasoning_text.delta`), before
/// the text.
#[test]
fn thinking_comes_back_as_thinking_blocks_and_reasoning_items_whole_and_streamed() {
    let server = server(ReasoningFormat::Deepseek, Some(THINKING_TEMPLATE));
    let (reasoning, content, request) = three_ways(&server, 9);
    assert!(!reasoning.is_empty(), "the chat answer thought nothing");
    // Messages, whole: a thinking block, then the text.
    let (status, body) = server.post("/v1/messages", &request);
    assert_eq!(status, 200, "{body}");
    let blocks = body["content"].as_array().expect("content");
    assert_eq!(blocks[0]["type"], "thinking", "{body}");
    assert_eq!(blocks[0]["thinking"], reasoning.as_str(), "{body}");
    assert_eq!((&blocks[1]["type"], &blocks[1]["text"]), (&json!("text"), &json!(content)), "{body}");
    // Messages, streamed: thinking_delta events in block 0, text in 1.
    let mut streamed = request.clone();
    streamed["stream"] = json!(true);
    let (_, events) = server.named_stream("/v1/messages", &streamed);
    let (mut thought, mut said) = (String::new(), String::new());
    let mut starts = Vec::new();
    for (name, data) in &events {
        match name.as_str() {
            "content_block_start" => starts.push((data["index"].clone(), data["content_block"]["type"].clone())),
            "content_block_delta" if data["delta"]["type"] == "thinking_delta" => {
                assert_eq!(data["index"], 0, "{data}");
                thought.push_str(data["delta"]["thinking"].as_str().expect("thinking"));
            }
            "content_block_delta" => said.push_str(data["delta"]["text"].as_str().unwrap_or("")),
            _ => {}
        }
    }
    assert_eq!(starts, [(json!(0), json!("thinking")), (json!(1), json!("text"))], "{events:?}");
    assert_eq!((thought.as_str(), said.as_str()), (reasoning.as_str(), content.as_str()), "streamed as whole");
    // Responses, whole: a reasoning item, then the message.
    let input = json!({"input": "why?", "max_output_tokens": 16, "temperature": 1.0, "seed": 9});
    let (status, body) = server.post("/v1/responses", &input);
    assert_eq!(status, 200, "{body}");
    let output = body["output"].as_array().expect("output");
    assert_eq!(output[0]["type"], "reasoning", "{body}");
    assert_eq!(output[0]["content"][0], json!({"type": "reasoning_text", "text": reasoning}), "{body}");
    assert_eq!(output[1]["content"][0]["text"], content.as_str(), "{body}");
    // Responses, streamed: reasoning_text deltas at output 0, the same
    // items in the completed response.
    let mut streamed = input.clone();
    streamed["stream"] = json!(true);
    let (_, events) = server.named_stream("/v1/responses", &streamed);
    let mut thought = String::new();
    for (name, data) in &events {
        if name == "response.reasoning_text.delta" {
            assert_eq!(data["output_index"], 0, "{data}");
            thought.push_str(data["delta"].as_str().expect("delta"));
        }
        if name == "response.reasoning_text.done" {
            assert_eq!(data["text"], reasoning.as_str(), "{data}");
        }
    }
    assert_eq!(thought, reasoning, "streamed as whole");
    let (last, data) = events.last().expect("events");
    assert_eq!(last, "response.incomplete", "16 tokens of thinking never closed: {data}");
    let without_ids = |output: &Value| {
        let mut output = output.clone();
        output.as_array_mut().expect("output").iter_mut().for_each(|item| drop(item["id"].take()));
        output
    };
    assert_eq!(without_ids(&data["response"]["output"]), without_ids(&body["output"]), "streamed as whole");
}

/// `usage.completion_tokens_details.reasoning_tokens` (chat, whole and in
/// the streamed usage chunk) and `usage.output_tokens_details.reasoning_tokens`
/// (Responses, whole and in the last event) count the generated tokens of
/// the thinking: all of an answer whose thinking never closed, none of an
/// answer without thinking or whose thinking is not split out.
#[test]
fn reasoning_tokens_count_the_thinkings_generated_tokens() {
    let chat_counts = |server: &Server| {
        let (status, body) = server.post("/v1/chat/completions", &request());
        assert_eq!(status, 200, "{body}");
        let usage = &body["usage"];
        let whole =
            (usage["completion_tokens"].clone(), usage["completion_tokens_details"]["reasoning_tokens"].clone());
        let mut streamed = request();
        streamed["stream"] = json!(true);
        streamed["stream_options"] = json!({"include_usage": true});
        let (status, events) = server.stream("/v1/chat/completions", &streamed);
        assert_eq!(status, 200);
        let last: Value = serde_json::from_str(&events[events.len() - 2]).expect("the usage chunk");
        let usage = &last["usage"];
        let streamed =
            (usage["completion_tokens"].clone(), usage["completion_tokens_details"]["reasoning_tokens"].clone());
        assert_eq!(whole, streamed, "streamed as whole: {last}");
        whole
    };
    let thinking = server(ReasoningFormat::Deepseek, Some(THINKING_TEMPLATE));
    assert_eq!(chat_counts(&thinking), (json!(12), json!(12)), "12 tokens of thinking never closed");
    assert_eq!(chat_counts(&server(ReasoningFormat::None, Some(THINKING_TEMPLATE))), (json!(12), json!(0)));
    assert_eq!(chat_counts(&server(ReasoningFormat::Deepseek, None)), (json!(12), json!(0)));
    let input = json!({"input": "why?", "max_output_tokens": 12, "temperature": 1.0, "seed": 9});
    let (status, body) = thinking.post("/v1/responses", &input);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["usage"]["output_tokens_details"]["reasoning_tokens"], body["usage"]["output_tokens"], "{body}");
    assert_eq!(body["usage"]["output_tokens"], 12, "{body}");
    let mut streamed = input.clone();
    streamed["stream"] = json!(true);
    let (_, events) = thinking.named_stream("/v1/responses", &streamed);
    let (_, last) = events.last().expect("events");
    assert_eq!(last["response"]["usage"], body["usage"], "streamed as whole");
}

/// Qwen 3's switch: the generation prompt opens the thinking unless the
/// template's `enable_thinking` is false, when it writes an empty one.
const SWITCHED_TEMPLATE: &str = "{% for message in messages %}\
{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}\
{% endfor %}{% if reasoning_effort is defined %}{{ 'effort: ' + reasoning_effort + '\\n' }}{% endif %}\
{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}\
{% if enable_thinking is defined and enable_thinking is false %}{{ '<think>\\n\\n</think>\\n\\n' }}\
{% else %}{{ '<think>\\n' }}{% endif %}{% endif %}";

/// `chat_template_kwargs` reach the template (over the server's
/// `--chat-template-kwargs`): `enable_thinking: false` turns the thinking
/// off, so the answer is content; `reasoning_effort` is passed as a
/// variable; a value that is not an object is a 400 that names it.
#[test]
fn chat_template_kwargs_reach_the_template_and_turn_the_thinking_off() {
    let options = ServerOptions {
        body_limit: BODY_LIMIT,
        chat_template: Some(SWITCHED_TEMPLATE.to_string()),
        chat_template_kwargs: json!({"reasoning_effort": "low"}).as_object().cloned().expect("object"),
        ..ServerOptions::default()
    };
    let server = Server::start_with(1, 4, 1024, options);
    let messages = json!([{"role": "user", "content": "why?"}]);
    let prompt = |body: Value| {
        let (status, body) = server.post("/apply-template", &body);
        assert_eq!(status, 200, "{body}");
        body["prompt"].as_str().expect("prompt").to_string()
    };
    assert!(
        prompt(json!({"messages": messages})).ends_with("effort: low\n<|im_start|>assistant\n<think>\n"),
        "the server's kwargs"
    );
    let off =
        json!({"messages": messages, "chat_template_kwargs": {"enable_thinking": false, "reasoning_effort": "high"}});
    let want = "effort: high\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
    assert!(prompt(off).ends_with(want), "the request's over the server's");

    let mut request = request();
    let (status, body) = server.post("/v1/chat/completions", &request);
    assert_eq!(status, 200, "{body}");
    assert!(body["choices"][0]["message"]["reasoning_content"].as_str().is_some_and(|r| !r.is_empty()), "{body}");
    request["chat_template_kwargs"] = json!({"enable_thinking": false});
    let (status, body) = server.post("/v1/chat/completions", &request);
    assert_eq!(status, 200, "{body}");
    let message = &body["choices"][0]["message"];
    assert!(message.get("reasoning_content").is_none_or(Value::is_null), "thinking off: {body}");
    assert!(message["content"].as_str().is_some_and(|c| !c.is_empty()), "{body}");
    request["chat_template_kwargs"] = json!(["enable_thinking"]);
    let (status, body) = server.post("/v1/chat/completions", &request);
    error_of(status, &body, 400, "chat_template_kwargs");
    request["chat_template_kwargs"] = Value::Null;
    request["reasoning_effort"] = json!(3);
    let (status, body) = server.post("/v1/chat/completions", &request);
    error_of(status, &body, 400, "reasoning_effort");
}
