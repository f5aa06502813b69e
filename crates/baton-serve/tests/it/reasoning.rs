//! `reasoning_content`: with a template whose generation prompt opens the
//! thinking (`<think>`, as DeepSeek-R1's), the answer's thinking comes
//! back in `message.reasoning_content` (streamed as
//! `delta.reasoning_content`), not in `content`; `--reasoning-format none`
//! leaves it in `content`; an answer without thinking has no
//! `reasoning_content`.

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
