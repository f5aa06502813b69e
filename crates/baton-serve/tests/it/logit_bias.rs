//! `logit_bias` on `/v1/completions` and `/v1/chat/completions`: each
//! bias is added to its token's logit before sampling (-100 bans a token,
//! +100 forces it, `false` bans it as llama-server's), greedy or sampled,
//! free or held to a grammar; a text in place of an id biases its tokens
//! (llama-server's); a bias that cannot be applied is a 400.

use baton_gen::constraint::GrammarSource;
use baton_serve::engine::{Event, GenerateRequest, OutputFormat};
use serde_json::{json, Value};

use crate::server::*;

const PROMPT: [u32; 5] = [11, 22, 33, 44, 55];

/// The first token a greedy generation of `format` draws after `PROMPT`.
fn first_token(server: &Server, format: OutputFormat) -> u32 {
    let request = GenerateRequest { format, ..GenerateRequest::greedy(PROMPT.to_vec(), 1) };
    let mut generation = server.engine.submit(request).expect("submit");
    loop {
        match generation.blocking_next() {
            Some(Event::Token(token)) => return token,
            Some(Event::Started { .. } | Event::Progress { .. } | Event::Logprobs(_)) => {}
            other => panic!("no first token: {other:?}"),
        }
    }
}

/// The text of one token, as the answer carries it.
fn piece(server: &Server, token: u32) -> String {
    let bytes = server.engine.tokenizer().token_bytes(token, false).expect("a token");
    String::from_utf8_lossy(bytes).into_owned()
}

fn complete(server: &Server, extra: Value) -> String {
    let mut body = json!({"prompt": PROMPT, "max_tokens": 1, "temperature": 0, "ignore_eos": true});
    for (key, value) in extra.as_object().expect("an object") {
        body[key] = value.clone();
    }
    let (status, answer) = server.post("/v1/completions", &body);
    assert_eq!(status, 200, "{body}: {answer}");
    answer["choices"][0]["text"].as_str().expect("text").to_string()
}

#[test]
fn logit_bias_bans_and_forces_tokens_greedy_sampled_and_constrained() {
    let server = Server::start(2, 8, 256);
    let best = first_token(&server, OutputFormat::Text);
    let forced = server.engine.tokenizer().encode("Z", Default::default()).expect("encode")[0];
    assert_ne!(best, forced, "pick another forced token");
    assert_eq!(complete(&server, json!({})), piece(&server, best));
    for (name, bias) in [
        ("-100 as an object", json!({ best.to_string(): -100 })),
        ("false as an object", json!({ best.to_string(): false })),
        ("-100 as pairs", json!([[best, -100]])),
        ("false as pairs", json!([[best, false]])),
    ] {
        let text = complete(&server, json!({ "logit_bias": bias }));
        assert_ne!(text, piece(&server, best), "{name}: the banned token was drawn");
    }
    for temperature in [0.0, 1.0] {
        let text = complete(&server, json!({"logit_bias": { forced.to_string(): 100 }, "temperature": temperature}));
        assert_eq!(text, piece(&server, forced), "+100 forces the token at temperature {temperature}");
    }
    // Held to a grammar: the bias applies among the tokens that fit.
    let (grammars, gbnf) = (&server.engine.info().grammars, "root ::= [a-z]+");
    let format = OutputFormat::grammar(&GrammarSource::Gbnf(gbnf.into()), grammars).expect("compiles");
    let held = first_token(&server, format);
    let text = complete(&server, json!({"grammar": gbnf, "logit_bias": { held.to_string(): -100 }}));
    assert_ne!(text, piece(&server, held), "a banned token was drawn under a grammar");
    assert!(!text.is_empty() && text.bytes().all(|b| b.is_ascii_lowercase()), "{text:?} is not held to {gbnf}");
    // Chat takes it too.
    let chat = json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "temperature": 0,
        "logit_bias": { forced.to_string(): 100 }});
    let (status, answer) = server.post("/v1/chat/completions", &chat);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["choices"][0]["message"]["content"], piece(&server, forced), "{answer}");
}

#[test]
fn a_logit_bias_that_cannot_apply_is_a_400() {
    let server = Server::start(1, 4, 64);
    for bias in [
        json!({"-1": 1}),
        json!({"1000000": 1}),
        json!({"5": "x"}),
        json!({"5": true}),
        json!({"5": null}),
        json!({"5": 101}),
        json!({"5": -100.5}),
        json!([[5]]),
        json!([["hello", "x"]]),
        json!([[5, 1, 2]]),
        json!([[1000000, 1]]),
        json!(5),
        json!("5"),
    ] {
        let body = json!({"prompt": PROMPT, "max_tokens": 1, "logit_bias": bias});
        let (status, answer) = server.post("/v1/completions", &body);
        error_of(status, &answer, 400, &bias.to_string());
        assert_eq!(answer["error"]["param"], "logit_bias", "{bias}: {answer}");
    }
    for bias in [json!(null), json!({}), json!([])] {
        let (status, answer) =
            server.post("/v1/completions", &json!({"prompt": PROMPT, "max_tokens": 1, "logit_bias": bias}));
        assert_eq!(status, 200, "{bias}: {answer}");
    }
}

#[test]
fn a_text_in_place_of_an_id_biases_its_tokens() {
    let server = Server::start(1, 4, 64);
    let tokenizer = server.engine.tokenizer().clone();
    let best = first_token(&server, OutputFormat::Text);
    let best_text = piece(&server, best);
    assert_eq!(tokenizer.encode(&best_text, Default::default()).expect("encode"), vec![best], "{best_text:?}");
    let forced = tokenizer.encode("Z", Default::default()).expect("encode")[0];
    for (name, bias) in [
        ("a banned text as an object", json!({ best_text.clone(): -100 })),
        ("a banned text as pairs", json!([[best_text, false]])),
    ] {
        assert_ne!(complete(&server, json!({ "logit_bias": bias })), piece(&server, best), "{name}");
    }
    for (name, bias) in [
        ("an object", json!({"Z": 100})),
        ("pairs", json!([["Z", 100]])),
        ("ids and texts", json!([[5, -1], ["Z", 100]])),
    ] {
        assert_eq!(complete(&server, json!({ "logit_bias": bias })), piece(&server, forced), "{name}");
    }
    // On llama-server's native route too.
    let body =
        json!({"prompt": PROMPT, "n_predict": 1, "temperature": 0, "ignore_eos": true, "logit_bias": [["Z", 100]]});
    let (status, answer) = server.post("/completion", &body);
    assert_eq!((status, answer["content"].as_str()), (200, Some(piece(&server, forced).as_str())), "{answer}");
}
