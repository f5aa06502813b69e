//! Earlier tool calls and their results passed to a template of the
//! model's own as fields (`tool_calls`, `tool` messages with
//! `tool_call_id`), which writes them in the model's syntax, and the tools
//! it declares itself (`tools`), on the synthetic gpt-oss, Qwen3 and Gemma
//! 4 files. The templates are written here and read the fields as those
//! models' templates read them: gpt-oss's the first call's `function`
//! with its arguments through `tojson` (a mapping) and each result named
//! after the last call; Qwen3's each call's arguments as a string or a
//! mapping, results in a row one user turn; Gemma 4's the arguments as a
//! mapping it iterates, and the results as the model turn's
//! `tool_responses`. The same history through chat completions, Anthropic
//! Messages and Responses renders alike.

use baton_serve::http::ServerOptions;
use baton_synth::SynthShape;
use serde_json::{json, Value};

use crate::call_kit::*;
use crate::server::*;

/// Harmony's layout, reading calls as gpt-oss's template does. (The
/// templates here use no `-` in their tags: a `\n` after a tag is written
/// as `{{ '\n' }}`, which `trim_blocks` leaves.)
const HARMONY: &str = "{% if tools %}<|start|>developer<|message|># Tools\n\nnamespace functions {\n\n\
{% for tool in tools %}type {{ tool.function.name }} = (_: {{ tool.function.parameters | tojson }}) => any;{{ '\\n' }}\
{% endfor %}} // namespace functions<|end|>{% endif %}\
{% set last = namespace(name=none) %}{% for message in messages %}\
{% if message.role == 'assistant' and 'tool_calls' in message %}\
{% if message.thinking %}<|start|>assistant<|channel|>analysis<|message|>{{ message.thinking }}<|end|>{% endif %}\
{% set call = message.tool_calls[0] %}{% if call.function %}{% set call = call.function %}{% endif %}\
<|start|>assistant to=functions.{{ call.name }}<|channel|>commentary json<|message|>{{ call.arguments | tojson }}<|call|>\
{% set last.name = call.name %}\
{% elif message.role == 'assistant' %}<|start|>assistant<|channel|>final<|message|>{{ message.content }}<|end|>\
{% elif message.role == 'tool' %}\
<|start|>functions.{{ last.name }} to=assistant<|channel|>commentary<|message|>{{ message.content | tojson }}<|end|>\
{% else %}<|start|>{{ message.role }}<|message|>{{ message.content }}<|end|>{% endif %}\
{% endfor %}{% if add_generation_prompt %}<|start|>assistant{% endif %}";

/// ChatML with Hermes calls, reading them as Qwen3's template does.
const QWEN3: &str = "{% if tools %}<|im_start|>system\n# Tools\n<tools>\
{% for tool in tools %}{{ '\\n' }}{{ tool | tojson }}{% endfor %}{{ '\\n' }}</tools><|im_end|>{{ '\\n' }}{% endif %}\
{% for message in messages %}\
{% if message.role == 'assistant' %}<|im_start|>assistant\n{{ message.content }}\
{% for tool_call in message.tool_calls or [] %}\
{% if tool_call.function %}{% set tool_call = tool_call.function %}{% endif %}\
<tool_call>\n{\"name\": \"{{ tool_call.name }}\", \"arguments\": \
{% if tool_call.arguments is string %}{{ tool_call.arguments }}{% else %}{{ tool_call.arguments | tojson }}{% endif %}\
}{{ '\\n' }}</tool_call>{% endfor %}<|im_end|>{{ '\\n' }}\
{% elif message.role == 'tool' %}\
{% if loop.first or messages[loop.index0 - 1].role != 'tool' %}<|im_start|>user{% endif %}\
{{ '\\n' }}<tool_response>\n{{ message.content }}\n</tool_response>\
{% if loop.last or messages[loop.index0 + 1].role != 'tool' %}<|im_end|>{{ '\\n' }}{% endif %}\
{% else %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>{{ '\\n' }}{% endif %}\
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

/// Gemma 4's turns, reading calls and results as its template does.
const GEMMA4: &str = "{% macro value(v) %}{% if v is string %}<|\"|>{{ v }}<|\"|>{% else %}{{ v }}{% endif %}{% endmacro %}\
{{ bos_token }}{% if tools %}<|turn>system\n\
{% for tool in tools %}<|tool>declaration:{{ tool.function.name }}{{ '{}' }}<tool|>{% endfor %}<turn|>{{ '\\n' }}{% endif %}\
{% set ns = namespace(prev=none) %}\
{% for message in messages %}{% set ns.prev = none %}\
<|turn>{{ 'model' if message.role == 'assistant' else message.role }}{{ '\\n' }}\
{% for call in message['tool_calls'] or [] %}<|tool_call>call:{{ call['function']['name'] }}{{ '{' }}\
{% if call['function']['arguments'] is mapping %}\
{% for k, v in call['function']['arguments'] | dictsort %}{{ k }}:{{ value(v) }}{{ ',' if not loop.last }}{% endfor %}\
{% endif %}{{ '}' }}<tool_call|>{% endfor %}\
{% for r in message['tool_responses'] or [] %}<|tool_response>response:{{ r['name'] }}{{ '{' }}\
{% if r['response'] is mapping %}\
{% for k, v in r['response'] | dictsort %}{{ k }}:{{ value(v) }}{{ ',' if not loop.last }}{% endfor %}\
{% else %}value:{{ value(r['response']) }}{% endif %}{{ '}' }}<tool_response|>{% set ns.prev = 'tool_response' %}{% endfor %}\
{{ message['content'] | trim }}\
{% if not (message['tool_responses'] and not message['content']) %}<turn|>{{ '\\n' }}{% endif %}\
{% endfor %}{% if add_generation_prompt and ns.prev != 'tool_response' %}<|turn>model{{ '\\n' }}{% endif %}";

fn server(shape: SynthShape, template: &str) -> Server {
    let options =
        ServerOptions { body_limit: BODY_LIMIT, chat_template: Some(template.to_string()), ..ServerOptions::default() };
    Server::start_shape(shape, 1024, options)
}

/// A question, the model's earlier call (its arguments OpenAI's JSON
/// text) and the call's result.
fn history() -> Value {
    json!([
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "{\"temp\": 3}"},
    ])
}

/// The same history as Anthropic Messages.
fn messages_history() -> Value {
    json!([
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "get_weather",
            "input": {"city": "Oslo"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "{\"temp\": 3}"}]},
    ])
}

/// The same history as Responses input items.
fn responses_history() -> Value {
    json!([
        {"role": "user", "content": "Weather in Oslo?"},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"},
        {"type": "function_call_output", "call_id": "c1", "output": "{\"temp\": 3}"},
    ])
}

/// The history rendered: it ends with `call_and_result` (the call and its
/// result in the model's syntax, and the generation prompt); with tools,
/// the template declares them (`declared`), not Baton's description; and
/// chat completions, Messages and Responses all answer the same history,
/// whose prompt is as long through chat completions as through Messages.
fn assert_written_in_the_models_syntax(server: &Server, call_and_result: &str, declared: &str) {
    let (status, body) = server.post("/apply-template", &json!({"messages": history()}));
    assert_eq!(status, 200, "{body}");
    let prompt = body["prompt"].as_str().expect("prompt");
    assert!(prompt.ends_with(call_and_result), "{prompt}");
    assert!(!prompt.contains("<tool_response>") || call_and_result.contains("<tool_response>"), "{prompt}");

    let with_tools = json!({"messages": history(), "tools": tools()});
    let (status, body) = server.post("/apply-template", &with_tools);
    assert_eq!(status, 200, "{body}");
    let prompt = body["prompt"].as_str().expect("prompt");
    assert!(prompt.contains(declared) && prompt.ends_with(call_and_result), "{prompt}");
    assert!(!prompt.contains("To call a function"), "the template declares the tools, Baton does not: {prompt}");

    let (status, chat) = server.post("/v1/chat/completions/input_tokens", &with_tools);
    assert_eq!(status, 200, "{chat}");
    let anthropic_tools: Vec<Value> = tools()
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| {
            json!({"name": t["function"]["name"], "description": t["function"]["description"],
            "input_schema": t["function"]["parameters"]})
        })
        .map(|mut t| {
            if t["description"].is_null() {
                t.as_object_mut().map(|o| o.remove("description"));
            }
            t
        })
        .collect();
    let counted = json!({"model": "m", "messages": messages_history(), "tools": anthropic_tools});
    let (status, messages) = server.post("/v1/messages/count_tokens", &counted);
    assert_eq!(status, 200, "{messages}");
    assert_eq!(chat["input_tokens"], messages["input_tokens"], "Messages renders the history as chat completions");

    let required = json!({"messages": history(), "tools": tools(), "tool_choice": "required", "max_tokens": 48,
        "seed": 1});
    let (status, body) = server.post("/v1/chat/completions", &required);
    assert_eq!(status, 200, "{body}");
    let (status, body) = server.post(
        "/v1/messages",
        &json!({"model": "m", "max_tokens": 48, "messages": messages_history(), "tools": anthropic_tools}),
    );
    assert_eq!(status, 200, "{body}");
    let responses_tools: Vec<Value> = tools()
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| json!({"type": "function", "name": t["function"]["name"], "parameters": t["function"]["parameters"]}))
        .collect();
    let (status, body) = server.post(
        "/v1/responses",
        &json!({"input": responses_history(), "tools": responses_tools, "max_output_tokens": 48}),
    );
    assert_eq!(status, 200, "{body}");
}

/// Gemma 4's template leaves a model turn open after tool results (the
/// model goes on in it) but closes it when an answer follows them, and
/// then writes no generation prompt: the prompt gets a model turn opened,
/// as llama.cpp opens one, through `/apply-template` and the tokens alike.
#[test]
fn a_gemma4_turn_closed_after_results_and_an_answer_gets_a_new_model_turn() {
    let server = server(SynthShape::Gemma4, GEMMA4);
    let mut messages = history();
    messages.as_array_mut().expect("a list").push(json!({"role": "assistant", "content": "It is 3 degrees."}));
    let request = json!({"messages": messages, "add_generation_prompt": true});
    let (status, body) = server.post("/apply-template", &request);
    assert_eq!(status, 200, "{body}");
    let prompt = body["prompt"].as_str().expect("prompt");
    assert!(prompt.ends_with("<tool_response|>It is 3 degrees.<turn|>\n<|turn>model\n"), "{prompt}");
    let (status, counted) = server.post("/v1/chat/completions/input_tokens", &request);
    assert_eq!(status, 200, "{counted}");
    let tokenized = json!({"content": prompt, "add_special": false, "parse_special": true});
    let (status, tokens) = server.post("/tokenize", &tokenized);
    assert_eq!(status, 200, "{tokens}");
    assert_eq!(counted["input_tokens"].as_u64(), tokens["tokens"].as_array().map(|t| t.len() as u64), "{prompt}");
    // Results alone leave the turn open: no new turn.
    let (status, body) = server.post("/apply-template", &json!({"messages": history()}));
    assert_eq!(status, 200, "{body}");
    assert!(body["prompt"].as_str().expect("prompt").ends_with("<tool_response|>"), "{body}");
}

#[test]
fn a_harmony_template_writes_an_earlier_call_on_the_commentary_channel_and_its_result_from_the_function() {
    let server = server(SynthShape::GptOss, HARMONY);
    assert_written_in_the_models_syntax(
        &server,
        "<|start|>user<|message|>Weather in Oslo?<|end|>\
         <|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Oslo\"}<|call|>\
         <|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>\"{\\\"temp\\\": 3}\"<|end|>\
         <|start|>assistant",
        "namespace functions {\n\ntype get_weather = (_: {\"type\": \"object\", \"properties\": {\"city\": ",
    );
}

#[test]
fn a_qwen3_template_writes_an_earlier_call_in_its_tags_and_the_result_as_a_user_turn() {
    let server = server(SynthShape::Qwen3, QWEN3);
    assert_written_in_the_models_syntax(
        &server,
        "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call><|im_end|>\n\
         <|im_start|>user\n<tool_response>\n{\"temp\": 3}\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
        "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"The weather of a city\"",
    );
}

#[test]
fn a_gemma4_template_writes_an_earlier_call_and_its_response_in_the_model_turn() {
    let server = server(SynthShape::Gemma4, GEMMA4);
    assert_written_in_the_models_syntax(
        &server,
        "<|turn>user\nWeather in Oslo?<turn|>\n<|turn>model\n\
         <|tool_call>call:get_weather{city:<|\"|>Oslo<|\"|>}<tool_call|>\
         <|tool_response>response:get_weather{temp:3}<tool_response|>",
        "<|turn>system\n<|tool>declaration:get_weather{}<tool|><|tool>declaration:get_time{}<tool|><turn|>\n",
    );
}
