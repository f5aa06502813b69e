//! The Messages answer, whole (`{"type": "message", …}`) or as Anthropic's
//! events: `message_start`, `ping`, each content block's
//! `content_block_start`, `content_block_delta`s (`thinking_delta` of a
//! `thinking` block, `text_delta`, or the call's input as one
//! `input_json_delta`) and `content_block_stop`, then
//! `message_delta` (the stop reason and the output tokens) and
//! `message_stop`. A failure after the stream began is an `error` event.

use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use axum::Json;
use baton_gen::openai::Usage;
use baton_model::Tokenizer;
use serde_json::{json, Value};

use super::error::AnthropicError;
use crate::engine::Generation;
use crate::http::events::{named_event, spawn_stream};
use crate::http::params::Job;
use crate::http::reply::{self, Broken, Ending, Piece, Stop, Whole};
use crate::http::tools::Call;

/// What a Messages answer is built from, besides its generation.
pub struct Answering {
    /// The model's tokenizer.
    pub tokenizer: Arc<Tokenizer>,
    /// The checked request.
    pub job: Job,
    /// The message's id (`msg_…`).
    pub id: String,
    /// The served model's name.
    pub model: String,
}

impl Answering {
    /// The id of the answer's tool call.
    fn call_id(&self) -> String {
        format!("toolu_{}", self.id.trim_start_matches("msg_"))
    }

    /// The message with `content`, `stop` and `usage` (none yet: `null`s
    /// and the prompt's count, as `message_start` carries it).
    fn message(&self, content: Vec<Value>, ending: Option<&Ending>) -> Value {
        let prompt = self.job.request.prompt.len();
        let (reason, sequence) = ending.map_or((Value::Null, Value::Null), |e| stop_reason(&e.stop));
        let output = ending.map_or(0, |e| e.usage.completion_tokens);
        let cached = ending.map_or(0, |e| e.usage.prompt_tokens_details.cached_tokens);
        json!({
            "id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": content,
            "stop_reason": reason, "stop_sequence": sequence, "usage": usage(prompt, output, cached),
        })
    }

    fn tool_use(&self, call: &Call, input: Value) -> Value {
        json!({"type": "tool_use", "id": self.call_id(), "name": call.name, "input": input})
    }
}

/// `usage`: the prompt's tokens, the answer's, and those of the prompt
/// read from the prefix cache (`cache_read_input_tokens`; counted in
/// `input_tokens` too, which is the whole prompt as `count_tokens` counts
/// it, where Anthropic counts cache reads apart).
fn usage(input: usize, output: usize, cached: usize) -> Value {
    json!({"input_tokens": input, "output_tokens": output, "cache_read_input_tokens": cached})
}

/// `stop_reason` and `stop_sequence`.
fn stop_reason(stop: &Stop) -> (Value, Value) {
    match stop {
        Stop::EndOfTurn => (json!("end_turn"), Value::Null),
        Stop::Length => (json!("max_tokens"), Value::Null),
        Stop::String(s) => (json!("stop_sequence"), json!(s)),
        Stop::ToolCall => (json!("tool_use"), Value::Null),
    }
}

/// A call's arguments as the object `input` is.
fn input_of(call: &Call) -> Value {
    serde_json::from_str(&call.arguments).unwrap_or_else(|_| json!({}))
}

/// A `thinking` block (no signature: nothing here signs the thinking).
fn thinking(text: &str) -> Value {
    json!({"type": "thinking", "thinking": text, "signature": ""})
}

/// Runs the generation and answers with the whole message.
pub async fn whole(generation: Generation, answering: Answering) -> Response {
    match reply::whole_text(generation, &answering.tokenizer, &answering.job).await {
        Ok(Whole { thinking: thought, text, ending }) => {
            let mut content = Vec::new();
            if !thought.is_empty() {
                content.push(thinking(&thought));
            }
            if !text.is_empty() || ending.call.is_none() {
                content.push(json!({"type": "text", "text": text}));
            }
            if let Some(call) = &ending.call {
                content.push(answering.tool_use(call, input_of(call)));
            }
            Json(answering.message(content, Some(&ending))).into_response()
        }
        Err(why) => AnthropicError(why).into_response(),
    }
}

/// The content blocks of a streamed message: the one open, if any, and
/// the next one's index.
struct Blocks<S> {
    send: S,
    open: Option<&'static str>,
    next: usize,
}

impl<S: Fn(&str, Value)> Blocks<S> {
    /// Starts a block (`content_block_start`), closing the open one.
    fn start(&mut self, block: Value, kind: &'static str) {
        self.stop();
        let index = self.next;
        (self.send)(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": block}),
        );
        self.open = Some(kind);
    }

    /// A delta to the open block, of `kind`, started first (`block`) when
    /// another kind or none is open.
    fn delta(&mut self, kind: &'static str, block: impl FnOnce() -> Value, delta: Value) {
        if self.open != Some(kind) {
            self.start(block(), kind);
        }
        let index = self.next;
        (self.send)("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": delta}));
    }

    /// Closes the open block (`content_block_stop`).
    fn stop(&mut self) {
        if self.open.take().is_some() {
            (self.send)("content_block_stop", json!({"type": "content_block_stop", "index": self.next}));
            self.next += 1;
        }
    }
}

fn empty_text() -> Value {
    json!({"type": "text", "text": ""})
}

/// Answers at once with Anthropic's event stream, which a task fills as
/// tokens come; a client that goes away ends the generation.
pub fn streamed(generation: Generation, answering: Answering) -> Response {
    spawn_stream(move |tx| async move {
        let send = |name: &str, data: Value| {
            let _ = tx.send(named_event(name, &data));
        };
        send("message_start", json!({"type": "message_start", "message": answering.message(Vec::new(), None)}));
        send("ping", json!({"type": "ping"}));
        let mut blocks = Blocks { send, open: None, next: 0 };
        let mut texts = 0;
        let on_piece = |piece: Piece| match piece {
            Piece::Thinking(piece) => {
                let delta = json!({"type": "thinking_delta", "thinking": piece});
                blocks.delta("thinking", || thinking(""), delta);
            }
            Piece::Text(piece) => {
                texts += 1;
                blocks.delta("text", empty_text, json!({"type": "text_delta", "text": piece}));
            }
        };
        let ending = reply::run(generation, &answering.tokenizer, &answering.job, on_piece, tx.closed()).await;
        let ending = match ending {
            Ok(ending) => ending,
            Err(Broken::Cancelled) => return,
            Err(why) => {
                let _ = tx.send(AnthropicError(why.into()).event());
                return;
            }
        };
        if texts == 0 && ending.call.is_none() {
            blocks.start(empty_text(), "text");
        }
        if let Some(call) = &ending.call {
            blocks.start(answering.tool_use(call, json!({})), "tool_use");
            let delta = json!({"type": "input_json_delta", "partial_json": call.arguments});
            blocks.delta("tool_use", || json!({}), delta);
        }
        blocks.stop();
        let (reason, sequence) = stop_reason(&ending.stop);
        let Usage { completion_tokens, prompt_tokens_details, .. } = ending.usage;
        send(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": sequence},
                "usage": {"output_tokens": completion_tokens,
                    "cache_read_input_tokens": prompt_tokens_details.cached_tokens}}),
        );
        send("message_stop", json!({"type": "message_stop"}));
    })
}
