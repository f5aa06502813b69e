//! The Responses answer, whole (`{"object": "response", …}`) or as its
//! `response.*` events, each `event: NAME` and data carrying its `type`
//! and `sequence_number`: `response.created`, `response.in_progress`;
//! for a reasoning model's thinking (when `--reasoning-format` splits it
//! out), a `reasoning` item: `response.output_item.added`,
//! `response.reasoning_text.delta`s, `response.reasoning_text.done`,
//! `response.output_item.done`; for the text, `response.output_item.added`,
//! `response.content_part.added`, `response.output_text.delta`s,
//! `response.output_text.done`, `response.content_part.done`,
//! `response.output_item.done`; for a call, `response.output_item.added`,
//! `response.function_call_arguments.delta` and `.done`,
//! `response.output_item.done`; then `response.completed` (or
//! `response.incomplete` when `max_output_tokens` ended it). A failure
//! after the stream began is `response.failed`.
//!
//! llama-server's additions, when the request asks: with
//! `timings_per_token` each delta and the last event carry the `timings`
//! so far (the last event the final ones); with `return_progress` a
//! `response.in_progress` event with `prompt_progress` (`total`, `cache`,
//! `processed` prompt tokens) comes as the slot takes the request and after
//! each chunk of the prompt read.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use axum::Json;
use baton_model::Tokenizer;
use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedSender;

use crate::engine::Generation;
use crate::http::error::ApiError;
use crate::http::events::{named_event, spawn_stream};
use crate::http::params::Job;
use crate::http::reply::{self, Broken, Ending, Piece, Stop, Whole};
use crate::http::tools::Call;
use crate::text::Progress;
use crate::timings::Timings;

/// What a Responses answer is built from, besides its generation.
pub struct Answering {
    /// The model's tokenizer.
    pub tokenizer: Arc<Tokenizer>,
    /// The checked request.
    pub job: Job,
    /// The response's id (`resp_…`).
    pub id: String,
    /// Unix seconds of the request.
    pub created_at: u64,
    /// The served model's name.
    pub model: String,
    /// The request's fields a response repeats (`instructions`, `tools`,
    /// `tool_choice`, `text`, `temperature`, `top_p`,
    /// `max_output_tokens`).
    pub echoed: serde_json::Map<String, Value>,
}

impl Answering {
    fn suffix(&self) -> &str {
        self.id.trim_start_matches("resp_")
    }

    fn message_id(&self) -> String {
        format!("msg_{}", self.suffix())
    }

    fn call_item_id(&self) -> String {
        format!("fc_{}", self.suffix())
    }

    fn reasoning_id(&self) -> String {
        format!("rs_{}", self.suffix())
    }

    /// The `reasoning` item holding `thinking` (its content empty while
    /// it streams).
    fn reasoning(&self, thinking: Option<&str>, status: &str) -> Value {
        let content: Vec<Value> = thinking.map(|t| json!({"type": "reasoning_text", "text": t})).into_iter().collect();
        json!({"type": "reasoning", "id": self.reasoning_id(), "summary": [], "content": content, "status": status})
    }

    /// The response object: `status`, its `output` items and, once it
    /// ended, its usage and why it is incomplete.
    fn response(&self, status: &str, output: Vec<Value>, ending: Option<&Ending>) -> Value {
        let incomplete = match ending.map(|e| &e.stop) {
            Some(Stop::Length) => json!({"reason": "max_output_tokens"}),
            _ => Value::Null,
        };
        let usage = ending.map_or(Value::Null, |e| {
            let u = &e.usage;
            json!({"input_tokens": u.prompt_tokens, "output_tokens": u.completion_tokens, "total_tokens": u.total_tokens,
                "input_tokens_details": {"cached_tokens": u.prompt_tokens_details.cached_tokens},
                "output_tokens_details": {"reasoning_tokens": u.completion_tokens_details.reasoning_tokens}})
        });
        let mut response = json!({
            "id": self.id, "object": "response", "created_at": self.created_at, "status": status,
            "model": self.model, "output": output, "error": null, "incomplete_details": incomplete,
            "instructions": null, "max_output_tokens": null, "temperature": null, "top_p": null,
            "tools": [], "tool_choice": "auto", "text": {"format": {"type": "text"}},
            "parallel_tool_calls": false, "previous_response_id": null, "store": false, "metadata": {},
            "usage": usage,
        });
        if let Some(map) = response.as_object_mut() {
            map.extend(self.echoed.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), v.clone())));
        }
        response
    }

    /// The assistant's message item holding `text`.
    fn message(&self, text: &str, status: &str) -> Value {
        json!({"type": "message", "id": self.message_id(), "status": status, "role": "assistant",
            "content": [output_text(text)]})
    }

    /// The function call item.
    fn call(&self, call: &Call, arguments: &str, status: &str) -> Value {
        json!({"type": "function_call", "id": self.call_item_id(),
            "call_id": format!("call_{}", self.suffix()), "name": call.name, "arguments": arguments, "status": status})
    }

    /// The whole output of an answer that ended: the thinking (if any),
    /// the message (unless it is only a call) and the call.
    fn output(&self, thinking: &str, text: &str, ending: &Ending) -> Vec<Value> {
        let status = status(ending);
        let mut output = Vec::new();
        if !thinking.is_empty() {
            output.push(self.reasoning(Some(thinking), "completed"));
        }
        if !text.is_empty() || ending.call.is_none() {
            output.push(self.message(text, status));
        }
        if let Some(call) = &ending.call {
            output.push(self.call(call, &call.arguments, "completed"));
        }
        output
    }
}

fn output_text(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": []})
}

/// `completed`, or `incomplete` when the token limit ended the answer.
fn status(ending: &Ending) -> &'static str {
    match ending.stop {
        Stop::Length => "incomplete",
        _ => "completed",
    }
}

/// Runs the generation and answers with the whole response.
pub async fn whole(generation: Generation, answering: Answering) -> Response {
    match reply::whole_text(generation, &answering.tokenizer, &answering.job).await {
        Ok(Whole { thinking, text, ending }) => {
            let output = answering.output(&thinking, &text, &ending);
            Json(answering.response(status(&ending), output, Some(&ending))).into_response()
        }
        Err(why) => why.into_response(),
    }
}

/// The events of one stream, numbered.
struct Events {
    tx: UnboundedSender<String>,
    /// The next event's number (an atomic: the stream's future, which
    /// shares the events between its callbacks, is sent between threads;
    /// one task numbers them, in order).
    sequence: AtomicU64,
    /// Whether deltas and the last event carry the timings.
    timed: bool,
}

impl Events {
    fn send(&self, name: &str, mut data: Value) {
        data["type"] = json!(name);
        data["sequence_number"] = json!(self.sequence.fetch_add(1, Ordering::Relaxed));
        let _ = self.tx.send(named_event(name, &data));
    }

    /// `send` with the `timings`, when the request asked for them.
    fn send_timed(&self, name: &str, mut data: Value, timings: &Timings) {
        if self.timed {
            data["timings"] = timings.to_json();
        }
        self.send(name, data);
    }
}

/// The items of a streamed response as they come: the thinking, then the
/// message.
struct Items<'a> {
    events: &'a Events,
    a: &'a Answering,
    thinking: String,
    text: String,
    /// The item open: `reasoning` or `message`, at `open_index`.
    open: Option<&'static str>,
    /// The next item's output index.
    next: usize,
}

impl Items<'_> {
    fn place(&self, id: String) -> Value {
        json!({"item_id": id, "output_index": self.next, "content_index": 0})
    }

    fn piece(&mut self, piece: Piece, timings: &Timings) {
        let a = self.a;
        match piece {
            Piece::Thinking(piece) => {
                if self.open != Some("reasoning") {
                    self.close("in_progress");
                    let item = a.reasoning(None, "in_progress");
                    self.events.send("response.output_item.added", json!({"output_index": self.next, "item": item}));
                    self.open = Some("reasoning");
                }
                self.thinking.push_str(&piece);
                let mut delta = self.place(a.reasoning_id());
                delta["delta"] = json!(piece);
                self.events.send_timed("response.reasoning_text.delta", delta, timings);
            }
            Piece::Text(piece) => {
                self.open_message();
                self.text.push_str(&piece);
                let mut delta = self.place(a.message_id());
                delta["delta"] = json!(piece);
                delta["logprobs"] = json!([]);
                self.events.send_timed("response.output_text.delta", delta, timings);
            }
        }
    }

    fn open_message(&mut self) {
        if self.open == Some("message") {
            return;
        }
        self.close("in_progress");
        let item = self.a.message("", "in_progress");
        self.events.send("response.output_item.added", json!({"output_index": self.next, "item": item}));
        let mut added = self.place(self.a.message_id());
        added["part"] = output_text("");
        self.events.send("response.content_part.added", added);
        self.open = Some("message");
    }

    /// Closes the open item; a message with `status`.
    fn close(&mut self, status: &str) {
        let a = self.a;
        match self.open.take() {
            Some("reasoning") => {
                let mut done = self.place(a.reasoning_id());
                done["text"] = json!(self.thinking);
                self.events.send("response.reasoning_text.done", done);
                let item = a.reasoning(Some(&self.thinking), "completed");
                self.events.send("response.output_item.done", json!({"output_index": self.next, "item": item}));
            }
            Some(_) => {
                let mut done = self.place(a.message_id());
                done["text"] = json!(self.text);
                done["logprobs"] = json!([]);
                self.events.send("response.output_text.done", done);
                let mut part = self.place(a.message_id());
                part["part"] = output_text(&self.text);
                self.events.send("response.content_part.done", part);
                let item = a.message(&self.text, status);
                self.events.send("response.output_item.done", json!({"output_index": self.next, "item": item}));
            }
            None => return,
        }
        self.next += 1;
    }
}

/// Answers at once with the `response.*` event stream, which a task fills
/// as tokens come; a client that goes away ends the generation.
pub fn streamed(generation: Generation, answering: Answering) -> Response {
    spawn_stream(move |tx| async move {
        let closed = tx.clone();
        let a = &answering;
        let events = Events { tx, sequence: AtomicU64::new(0), timed: a.job.extras.timings_per_token };
        events.send("response.created", json!({"response": a.response("in_progress", Vec::new(), None)}));
        events.send("response.in_progress", json!({"response": a.response("in_progress", Vec::new(), None)}));
        let on_progress = |progress: Progress| {
            if a.job.extras.return_progress {
                let progress = progress.to_json();
                let response = a.response("in_progress", Vec::new(), None);
                events.send("response.in_progress", json!({"response": response, "prompt_progress": progress}));
            }
        };
        let mut items = Items { events: &events, a, thinking: String::new(), text: String::new(), open: None, next: 0 };
        let on_piece = |piece, timings: Timings| items.piece(piece, &timings);
        let ending = reply::run_reporting(generation, &a.tokenizer, &a.job, (on_piece, on_progress), closed.closed());
        let ending = match ending.await {
            Ok(ending) => ending,
            Err(Broken::Cancelled) => return,
            Err(why) => {
                let mut response = a.response("failed", Vec::new(), None);
                response["error"] = json!({"code": "server_error", "message": ApiError::from(why).body.message});
                events.send("response.failed", json!({"response": response}));
                return;
            }
        };
        if items.text.is_empty() && ending.call.is_none() {
            items.open_message();
        }
        items.close(status(&ending));
        if let Some(call) = &ending.call {
            let index = items.next;
            let item_id = a.call_item_id();
            events.send(
                "response.output_item.added",
                json!({"output_index": index, "item": a.call(call, "", "in_progress")}),
            );
            let delta = json!({"item_id": item_id, "output_index": index, "delta": call.arguments});
            events.send_timed("response.function_call_arguments.delta", delta, &ending.timings);
            let done =
                json!({"item_id": item_id, "output_index": index, "name": call.name, "arguments": call.arguments});
            events.send("response.function_call_arguments.done", done);
            let item = a.call(call, &call.arguments, "completed");
            events.send("response.output_item.done", json!({"output_index": index, "item": item}));
        }
        let status = status(&ending);
        let response = a.response(status, a.output(&items.thinking, &items.text, &ending), Some(&ending));
        events.send_timed(&format!("response.{status}"), json!({"response": response}), &ending.timings);
    })
}
