//! Structured output through the grammar engine: llama-server's `grammar`
//! field (GBNF) on chat and completions, whole and streamed; JSON Schemas
//! as pydantic writes them (`Field(ge=0)`, patterns, `date-time`,
//! discriminated unions), which the old reader refused; and bad grammars,
//! which get a 400 naming the problem while the server serves on.

use baton_gen::constraint::GrammarSource;
use baton_testkit::schemas::pydantic_record;
use serde_json::{json, Value};

use crate::server::*;

const GBNF: &str = "root ::= answer \" \" count\nanswer ::= \"yes\" | \"no\"\ncount ::= [1-9] [0-9]{0,2}";

/// Whether `text` is a whole text of [`GBNF`].
fn is_answer(text: &str) -> bool {
    let Some((answer, count)) = text.split_once(' ') else { return false };
    ["yes", "no"].contains(&answer)
        && (1..=3).contains(&count.len())
        && !count.starts_with('0')
        && count.bytes().all(|b| b.is_ascii_digit())
}

#[test]
fn the_grammar_field_holds_chat_and_completions_answers_whole_and_streamed() {
    let server = Server::start(2, 8, 256);
    for seed in 0..4 {
        for (path, mut request) in [
            ("/v1/chat/completions", json!({"messages": [{"role": "user", "content": "answer"}]})),
            ("/v1/completions", json!({"prompt": "answer:"})),
        ] {
            let chat = path.contains("chat");
            request["grammar"] = json!(GBNF);
            request["seed"] = json!(seed);
            request["temperature"] = json!(1.0);
            request["max_tokens"] = json!(16);
            let (status, body) = server.post(path, &request);
            assert_eq!(status, 200, "{path}: {body}");
            let choice = &body["choices"][0];
            let text = match chat {
                true => choice["message"]["content"].as_str(),
                false => choice["text"].as_str(),
            }
            .expect("text");
            assert_eq!(choice["finish_reason"], "stop", "{path} seed {seed}: {body}");
            assert!(is_answer(text), "{path} seed {seed}: {text:?}");
            request["stream"] = json!(true);
            let (status, events) = server.stream(path, &request);
            assert_eq!(status, 200);
            let (streamed, finish, _) = read_stream(&events, chat);
            assert_eq!((streamed.as_str(), finish.as_str()), (text, "stop"), "{path} seed {seed} streamed");
        }
    }
}

#[test]
fn pydantic_schemas_with_patterns_bounds_dates_and_unions_are_served() {
    let server = Server::start(2, 8, 1024);
    let source = GrammarSource::JsonSchema(pydantic_record());
    let mut closed = 0;
    for seed in 0..4 {
        let request = json!({
            "messages": [{"role": "user", "content": "a record"}],
            "max_tokens": 200, "temperature": 0.7, "seed": seed,
            "response_format": {"type": "json_schema", "json_schema": {"name": "Record", "strict": true,
                "schema": pydantic_record()}},
        });
        let (status, body) = server.post("/v1/chat/completions", &request);
        assert_eq!(status, 200, "{body}");
        let choice = &body["choices"][0];
        let text = choice["message"]["content"].as_str().expect("content");
        let finish = choice["finish_reason"].as_str().expect("finish");
        assert!(held_to(&server, &source, text, finish == "stop"), "seed {seed} {finish}: {text:?}");
        if finish == "stop" {
            closed += 1;
            let record: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            let keys: Vec<&String> = record.as_object().expect("an object").keys().collect();
            assert_eq!(keys.len(), 4, "only the declared keys: {record}");
            assert!(record["count"].as_i64().is_some_and(|n| n >= 0), "{record}");
            let code = record["code"].as_str().expect("code");
            assert!(code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase()), "{record}");
            assert!(["cat", "dog"].contains(&record["pet"]["kind"].as_str().expect("kind")), "{record}");
        }
    }
    eprintln!("{closed} of 4 records closed within 200 tokens");
    assert!(closed > 0, "no record closed within 200 tokens");
}

#[test]
fn bad_grammars_get_a_400_naming_the_problem_and_the_server_serves_on() {
    let server = Server::start(1, 4, 256);
    let chat = |extra: Value| {
        let mut request = json!({"messages": [{"role": "user", "content": "x"}], "max_tokens": 4});
        for (key, value) in extra.as_object().expect("an object") {
            request[key] = value.clone();
        }
        request
    };
    let tool = json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]);
    for (path, request, param, says) in [
        (
            "/v1/chat/completions",
            chat(json!({"grammar": "root ::= item"})),
            "grammar",
            "`item` is used but never defined",
        ),
        ("/v1/completions", json!({"prompt": "x", "grammar": "root ::= (\"a\""}), "grammar", "never closed"),
        ("/v1/completions", json!({"prompt": "x", "grammar": "item ::= \"a\""}), "grammar", "no `root` rule"),
        ("/v1/chat/completions", chat(json!({"grammar": 7})), "", ""),
        (
            "/v1/chat/completions",
            chat(json!({"grammar": "root ::= \"a\"", "response_format": {"type": "json_object"}})),
            "grammar",
            "give one",
        ),
        ("/v1/chat/completions", chat(json!({"grammar": "root ::= \"a\"", "tools": tool})), "grammar", "tool"),
        (
            "/v1/chat/completions",
            chat(json!({"response_format": {"type": "json_schema", "json_schema": {"schema":
                {"type": "string", "pattern": "[a-"}}}})),
            "response_format",
            "",
        ),
    ] {
        let (status, body) = server.post(path, &request);
        error_of(status, &body, 400, &request.to_string());
        let message = body["error"]["message"].as_str().expect("a message");
        assert!(message.contains(says), "{request}: {message}");
        if !param.is_empty() {
            assert_eq!(body["error"]["param"], param, "{request}: {body}");
        }
    }
    // The Responses API names its own field.
    let bad = json!({"input": "x", "max_output_tokens": 4,
        "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "string", "pattern": "[a-"}}}});
    let (status, body) = server.post("/v1/responses", &bad);
    error_of(status, &body, 400, "a bad pattern in text.format");
    assert_eq!(body["error"]["param"], "text", "{body}");
    let (status, body) = server.post("/v1/chat/completions", &chat(json!({"grammar": "root ::= \"ok\""})));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "ok", "{body}");
}

#[test]
fn a_response_format_given_to_the_engine_compiles_when_submitted() {
    use baton_serve::engine::{Event, GenerateRequest, OutputFormat, SubmitError};
    let server = Server::start(1, 4, 256);
    let bad = json!({"type": "json_schema", "json_schema": {"schema": {"type": "string", "pattern": "[a-"}}});
    let format = OutputFormat::from_response_format(&bad).expect("the shape is right");
    match server.engine.submit(GenerateRequest { format, ..GenerateRequest::greedy(vec![1, 2, 3], 4) }) {
        Err(SubmitError::Grammar(why)) => assert!(why.contains("json_schema.schema"), "{why}"),
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("a schema of a bad pattern was taken"),
    }
    let format = OutputFormat::from_response_format(&json!({"type": "json_object"})).expect("the shape is right");
    let request = GenerateRequest { format, ..GenerateRequest::greedy(vec![1, 2, 3], 8) };
    let mut generation = server.engine.submit(request).expect("submitted");
    let mut tokens = Vec::new();
    loop {
        match generation.blocking_next() {
            Some(Event::Token(token)) => tokens.push(token),
            Some(Event::Done(_)) => break,
            Some(Event::Started { .. } | Event::Progress { .. } | Event::Logprobs(_)) => {}
            other => panic!("{other:?}"),
        }
    }
    let text = server.engine.tokenizer().decode(&tokens).expect("decode");
    assert!(held_to(&server, &GrammarSource::JsonObject, &text, false), "{text:?}");
    assert!(text.starts_with('{'), "{text:?}");
}
