//! The test server: `baton serve`'s router in-process on a synthetic tiny
//! model, spoken to with raw HTTP/1.1, and the helpers that read its
//! answers.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use baton_core::sync::WaitPolicy;
use baton_core::DType;
use baton_model::{LoadOptions, Model};
use baton_serve::engine::{Engine, EngineOptions, EngineStats};
use baton_serve::http::{serve, ServeError, ServerOptions};
use baton_synth::SynthShape;
use baton_testkit::devices::cpus;
use baton_testkit::synth::{synth_model, tiny_model};
use baton_testkit::TempDir;
use serde_json::{json, Value};

/// Body limit of the test servers (small, so a too-large body fits in the
/// socket's buffers).
pub(crate) const BODY_LIMIT: usize = 64 << 10;

/// Context of the servers whose first stream must outlast the test's
/// checks: it runs until this context is full (`ignore_eos`).
pub(crate) const LONG_CONTEXT: usize = 16384;

/// What drafts for a test server's engine besides n-grams.
pub(crate) enum Drafter {
    None,
    /// A tiny model of weights of this seed (`-md`).
    Model(u64),
    /// A synthetic model of this shape, type and seed (`-md`).
    ModelOf(SynthShape, DType, u64),
    /// The file's own prediction head (`--spec-type mtp`).
    Head,
}

/// A server on 127.0.0.1 and a free port, stopped when dropped.
pub(crate) struct Server {
    pub(crate) addr: SocketAddr,
    pub(crate) engine: Engine,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), ServeError>>>,
    _dir: TempDir,
}

impl Server {
    pub(crate) fn start(parallel: usize, queue: usize, context: usize) -> Server {
        Self::start_with(parallel, queue, context, ServerOptions { body_limit: BODY_LIMIT, ..ServerOptions::default() })
    }

    pub(crate) fn start_with(parallel: usize, queue: usize, context: usize, options: ServerOptions) -> Server {
        let engine = EngineOptions { parallel, queue, prefill_chunk: 32, ..EngineOptions::default() };
        Self::start_engine(context, engine, options)
    }

    /// A server whose engine runs with `engine` (its `parallel` slots of
    /// `context` positions).
    pub(crate) fn start_engine(context: usize, engine: EngineOptions, options: ServerOptions) -> Server {
        Self::start_drafting(context, engine, options, None)
    }

    /// As [`start_engine`](Self::start_engine), drafting with a tiny model
    /// of weights seeded `draft` (11: the served model's own) when given.
    pub(crate) fn start_drafting(
        context: usize,
        engine: EngineOptions,
        options: ServerOptions,
        draft: Option<u64>,
    ) -> Server {
        let (dir, path) = tiny_model("serve-http", DType::F32, 11);
        let drafter = draft.map_or(Drafter::None, Drafter::Model);
        Self::start_file(dir, &path, context, (engine, drafter), options)
    }

    /// A server of one slot of `context` positions on the synthetic model
    /// of `shape` (F32).
    pub(crate) fn start_shape(shape: SynthShape, context: usize, options: ServerOptions) -> Server {
        let engine = EngineOptions { parallel: 1, queue: 4, prefill_chunk: 32, ..EngineOptions::default() };
        Self::start_shape_engine((shape, DType::F32), context, engine, options)
    }

    /// As [`start_shape`](Self::start_shape), of weights of `dtype`, with
    /// `engine`.
    pub(crate) fn start_shape_engine(
        shape: (SynthShape, DType),
        context: usize,
        engine: EngineOptions,
        options: ServerOptions,
    ) -> Server {
        Self::start_shape_with(shape, context, (engine, Drafter::None), options)
    }

    /// As [`start_shape_engine`](Self::start_shape_engine), drafting as
    /// `drafting` says ([`Drafter::Head`]: the file's own prediction head,
    /// which qwen35 toys hold).
    pub(crate) fn start_shape_with(
        (shape, dtype): (SynthShape, DType),
        context: usize,
        drafting: (EngineOptions, Drafter),
        options: ServerOptions,
    ) -> Server {
        let (dir, path) = synth_model("serve-http", shape, dtype, 11);
        Self::start_file(dir, &path, context, drafting, options)
    }

    fn start_file(
        dir: TempDir,
        path: &std::path::Path,
        context: usize,
        (engine, drafter): (EngineOptions, Drafter),
        options: ServerOptions,
    ) -> Server {
        let load = LoadOptions { context: Some(context), slots: engine.parallel, ..LoadOptions::default() };
        let device = || cpus(&["cpu"], WaitPolicy::Block).remove(0);
        let model = Model::load(path, device(), &load).expect("load the synthetic model");
        let engine = match drafter {
            Drafter::Model(_) | Drafter::ModelOf(..) => {
                // The model stays mapped once its file is gone.
                let (_draft_dir, draft_path) = match drafter {
                    Drafter::ModelOf(shape, dtype, seed) => synth_model("serve-draft", shape, dtype, seed),
                    Drafter::Model(seed) => tiny_model("serve-draft", DType::F32, seed),
                    _ => unreachable!("matched above"),
                };
                let draft = Model::load(&draft_path, device(), &load).expect("load the draft model");
                let drafter = baton_gen::speculative::ModelDrafter::new(draft, &model).expect("same vocabulary");
                Engine::start_drafting(model, drafter, "tiny", engine).expect("engine")
            }
            Drafter::Head => Engine::start_mtp(model, path, "tiny", engine).expect("engine"),
            Drafter::None => Engine::start(model, "tiny", engine).expect("engine"),
        };
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).expect("bind");
        let addr = listener.local_addr().expect("address");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = engine.clone();
        let thread = std::thread::spawn(move || {
            let signal = async move {
                let _ = stopped.await;
            };
            let result = runtime.block_on(serve([listener], served, options, signal));
            // Blocking tasks the server left (bounded waits) must not hold
            // the test up.
            runtime.shutdown_timeout(Duration::from_secs(5));
            result
        });
        Server { addr, engine, stop: Some(stop), thread: Some(thread), _dir: dir }
    }

    /// Stops the server (as Ctrl-C does) and waits until `serve` returns,
    /// which must be `Ok`.
    pub(crate) fn stop(&mut self) {
        if let Some(Err(e)) = self.stop_result() {
            panic!("serve failed: {e}");
        }
    }

    /// Stops the server (as Ctrl-C does) and waits until `serve` returns;
    /// its result, unless it was stopped before.
    pub(crate) fn stop_result(&mut self) -> Option<Result<(), ServeError>> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let thread = self.thread.take()?;
        Some(thread.join().expect("the server thread"))
    }

    /// Whether `serve` has returned (by itself: the engine failed).
    #[cfg(feature = "fault-injection")]
    pub(crate) fn has_stopped(&self) -> bool {
        self.thread.as_ref().is_none_or(std::thread::JoinHandle::is_finished)
    }

    pub(crate) fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(self.addr).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
        stream
    }

    /// Sends a request; returns the status and the body (de-chunked).
    pub(crate) fn call(&self, method: &str, path: &str, body: &[u8]) -> (u16, String) {
        let mut stream = self.connect();
        send(&mut stream, method, path, body);
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).expect("read the answer");
        parse(&raw)
    }

    /// Sends a request with `headers` besides the usual ones; returns the
    /// status, the head (its header lines) and the body (de-chunked).
    pub(crate) fn call_with(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> (u16, String, String) {
        let mut stream = self.connect();
        send_with(&mut stream, method, path, headers, body);
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).expect("read the answer");
        let head = String::from_utf8_lossy(&raw).split("\r\n\r\n").next().unwrap_or_default().to_string();
        let (status, body) = parse(&raw);
        (status, head, body)
    }

    /// POSTs `body` as JSON; returns the status and the parsed body.
    pub(crate) fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let (status, text) = self.call("POST", path, body.to_string().as_bytes());
        let value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: not JSON ({e}): {text}"));
        (status, value)
    }

    /// POSTs a streaming request; returns the status and the `data:`
    /// events' payloads.
    pub(crate) fn stream(&self, path: &str, body: &Value) -> (u16, Vec<String>) {
        let (status, text) = self.call("POST", path, body.to_string().as_bytes());
        (status, events(&text))
    }

    /// Waits until `done` holds of the engine's counters (at most 20 s).
    pub(crate) fn wait_for(&self, what: &str, done: impl Fn(&EngineStats) -> bool) -> EngineStats {
        let start = Instant::now();
        loop {
            let stats = self.engine.stats();
            if done(&stats) {
                return stats;
            }
            assert!(start.elapsed() < Duration::from_secs(20), "waiting for {what}: {stats:?}");
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

pub(crate) fn send(stream: &mut TcpStream, method: &str, path: &str, body: &[u8]) {
    send_with(stream, method, path, &[], body);
}

/// As [`send`], with `headers` besides the usual ones.
pub(crate) fn send_with(stream: &mut TcpStream, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) {
    let extra: String = headers.iter().map(|(name, value)| format!("{name}: {value}\r\n")).collect();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).expect("write the head");
    // The server may answer (413) and close before reading all of a body.
    let _ = stream.write_all(body);
}

/// The status and the (de-chunked) body of a raw answer.
pub(crate) fn parse(raw: &[u8]) -> (u16, String) {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no head: {text}"));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("status: {head}"));
    let chunked = head.to_ascii_lowercase().contains("transfer-encoding: chunked");
    (status, if chunked { dechunk(body) } else { body.to_string() })
}

pub(crate) fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or_else(|_| panic!("chunk size {size:?}"));
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].strip_prefix("\r\n").unwrap_or(&rest[size..]);
    }
    out
}

/// The payloads of the `data:` events of an event stream, checking that
/// every event is `data: …` and a blank line.
pub(crate) fn events(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for event in text.split_terminator("\n\n") {
        let data = event.strip_prefix("data: ").unwrap_or_else(|| panic!("not a data event: {event:?}"));
        out.push(data.to_string());
    }
    out
}

/// The concatenated text of a stream's chunks, its finish reason and its
/// usage chunk, checking the stream's shape.
pub(crate) fn read_stream(events: &[String], chat: bool) -> (String, String, Option<Value>) {
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"), "{events:?}");
    let (mut text, mut finish, mut usage) = (String::new(), None, None);
    for (i, event) in events[..events.len() - 1].iter().enumerate() {
        let chunk: Value = serde_json::from_str(event).expect("a chunk is JSON");
        let object = if chat { "chat.completion.chunk" } else { "text_completion" };
        assert_eq!(chunk["object"], object, "{chunk}");
        assert_eq!(chunk["model"], "tiny");
        let choices = chunk["choices"].as_array().expect("choices");
        if choices.is_empty() {
            usage = Some(chunk["usage"].clone());
            continue;
        }
        assert!(finish.is_none(), "a chunk after the finish: {chunk}");
        let choice = &choices[0];
        if chat && i == 0 {
            assert_eq!(choice["delta"]["role"], "assistant");
        }
        let piece = if chat { &choice["delta"]["content"] } else { &choice["text"] };
        text.push_str(piece.as_str().unwrap_or(""));
        if let Some(reason) = choice["finish_reason"].as_str() {
            finish = Some(reason.to_string());
        }
    }
    (text, finish.expect("a finish_reason"), usage)
}

pub(crate) fn error_of(status: u16, body: &Value, expected: u16, what: &str) {
    assert_eq!(status, expected, "{what}: {body}");
    let error = &body["error"];
    assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}: {body}");
    assert!(error["type"].is_string(), "{what}: {body}");
    assert!(error.get("param").is_some() && error.get("code").is_some(), "{what}: {body}");
}

/// A stream that runs until the context is full (`ignore_eos`), once its
/// first event has come.
pub(crate) fn long_stream(server: &Server) -> TcpStream {
    let mut stream = server.connect();
    let body = json!({"prompt": "a", "stream": true, "ignore_eos": true, "temperature": 0});
    send(&mut stream, "POST", "/v1/completions", body.to_string().as_bytes());
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    while !String::from_utf8_lossy(&seen).contains("data: ") {
        let n = stream.read(&mut buf).expect("read the stream");
        assert!(n > 0, "the stream ended early");
        seen.extend_from_slice(&buf[..n]);
    }
    stream
}

/// The events of a named event stream (Anthropic's and the Responses
/// API's): each `event: NAME` and `data: {json}` and a blank line, whose
/// data's `type` is its name.
pub(crate) fn named_events(text: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for event in text.split_terminator("\n\n") {
        let (head, data) = event.split_once('\n').unwrap_or_else(|| panic!("not a named event: {event:?}"));
        let name = head.strip_prefix("event: ").unwrap_or_else(|| panic!("no event name: {event:?}"));
        let data = data.strip_prefix("data: ").unwrap_or_else(|| panic!("no data: {event:?}"));
        let data: Value = serde_json::from_str(data).unwrap_or_else(|e| panic!("{event:?}: {e}"));
        assert_eq!(data["type"], name, "{event:?}");
        out.push((name.to_string(), data));
    }
    out
}

impl Server {
    /// POSTs a streaming request to a route of named events; returns the
    /// status and the events.
    pub(crate) fn named_stream(&self, path: &str, body: &Value) -> (u16, Vec<(String, Value)>) {
        let (status, text) = self.call("POST", path, body.to_string().as_bytes());
        if status != 200 {
            panic!("{path}: {status}: {text}");
        }
        (status, named_events(&text))
    }
}

/// Anthropic's error document with `status` and error type `kind`.
pub(crate) fn anthropic_error_of(status: u16, body: &Value, expected: u16, kind: &str, what: &str) {
    assert_eq!(status, expected, "{what}: {body}");
    assert_eq!(body["type"], "error", "{what}: {body}");
    assert_eq!(body["error"]["type"], kind, "{what}: {body}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}: {body}");
}

/// Whether `text` is what the server's grammar engine holds `source` to:
/// a prefix of a text it accepts, whole when `whole` (read token by token
/// as the model's tokenizer splits it).
pub(crate) fn held_to(server: &Server, source: &baton_gen::constraint::GrammarSource, text: &str, whole: bool) -> bool {
    let vocabulary = server.engine.info().grammars.vocabulary().expect("the model's grammar vocabulary");
    let grammar = vocabulary.compile(source).unwrap_or_else(|e| panic!("served, yet refused here: {e}"));
    let mut constraint = baton_gen::constraint::Constraint::grammar(&grammar);
    let tokenizer = server.engine.tokenizer();
    let options = baton_model::baton_tokenizer::EncodeOptions { add_special: false, parse_special: false };
    let tokens = tokenizer.encode(text, options).expect("encode");
    let eos = tokenizer.eos_id().expect("an end token");
    tokens.iter().all(|&t| constraint.accept(t, tokenizer))
        && (!whole || constraint.is_complete() || constraint.allows(eos, tokenizer))
}

/// The `tool_calls` deltas a chat `request` streamed (each one's `index`
/// checked to count from 0) and its finish reason.
pub(crate) fn streamed_tool_calls(server: &Server, request: &Value) -> (Vec<Value>, String) {
    let mut streamed = request.clone();
    streamed["stream"] = json!(true);
    let (status, events) = server.stream("/v1/chat/completions", &streamed);
    assert_eq!(status, 200);
    let chunks: Vec<Value> =
        events[..events.len() - 1].iter().filter_map(|e| serde_json::from_str::<Value>(e).ok()).collect();
    let deltas: Vec<Value> = chunks
        .iter()
        .filter_map(|chunk| chunk["choices"][0]["delta"]["tool_calls"].as_array())
        .flatten()
        .cloned()
        .collect();
    for (i, call) in deltas.iter().enumerate() {
        assert_eq!(call["index"], i, "{call}");
    }
    let finish = chunks.iter().filter_map(|c| c["choices"][0]["finish_reason"].as_str()).next_back();
    (deltas, finish.expect("a finish reason").to_string())
}

/// The Responses `function_call` of a required call to `tools` (chat
/// completions' shape, flattened here as Responses takes them), as a
/// `tool_calls` entry's `function`.
pub(crate) fn responses_required_call(server: &Server, tools: &Value) -> Value {
    let flat: Vec<Value> = tools
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| {
            let mut flat = t["function"].clone();
            flat["type"] = json!("function");
            flat
        })
        .collect();
    let input = json!({"input": "Weather in Oslo?", "tools": flat, "tool_choice": "required",
        "max_output_tokens": 400, "temperature": 1.0, "seed": 5});
    let (status, body) = server.post("/v1/responses", &input);
    assert_eq!(status, 200, "{body}");
    let call = body["output"].as_array().expect("output").iter().find(|item| item["type"] == "function_call");
    let call = call.unwrap_or_else(|| panic!("no function_call: {body}"));
    json!({"function": {"name": call["name"], "arguments": call["arguments"]}})
}
