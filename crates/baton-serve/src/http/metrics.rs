//! `GET /metrics`: the engine's counters, gauges and latency histograms in
//! Prometheus' text format (version 0.0.4), Baton's (`baton_*`) and the
//! same figures under llama-server's names (`llama_server.rs`).

use axum::extract::State;
use axum::http::header::{HeaderName, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};

use super::state::AppState;
use crate::engine::EngineMetrics;
use exposition::{escape, family, histogram, single};

/// The text format's content type.
const CONTENT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `GET /metrics`, with llama-server's `Process-Start-Time-Unix` header
/// (the Unix second the server started).
pub async fn metrics(State(state): State<AppState>) -> Response {
    let text = render(&state.engine.metrics(), &state.engine.info().name);
    ([(CONTENT_TYPE, CONTENT.to_string()), (START_TIME, state.started.to_string())], text).into_response()
}

/// llama-server's header of the server's start on `/metrics`.
const START_TIME: HeaderName = HeaderName::from_static("process-start-time-unix");

/// The exposition of `m` for the model `model`.
pub fn render(m: &EngineMetrics, model: &str) -> String {
    let s = &m.stats;
    let mut out = String::new();
    family(
        &mut out,
        "baton_model_info",
        "gauge",
        "The served model.",
        &[("", format!("model=\"{}\"", escape(model)), 1.0)],
    );
    single(&mut out, "baton_requests_running", "gauge", "Requests generating now.", s.running as f64);
    single(&mut out, "baton_requests_queued", "gauge", "Requests waiting for a sequence slot.", s.queued as f64);
    let ended =
        [("stop", m.ended_stop), ("length", m.ended_length), ("failed", m.ended_failed), ("cancelled", s.cancelled)];
    let ended: Vec<_> = ended.iter().map(|(r, n)| ("", format!("reason=\"{r}\""), *n as f64)).collect();
    family(&mut out, "baton_requests_ended_total", "counter", "Requests ended, by how they ended.", &ended);
    single(&mut out, "baton_prompt_tokens_total", "counter", "Prompt tokens evaluated.", s.prompt_tokens as f64);
    single(
        &mut out,
        "baton_prompt_tokens_cached_total",
        "counter",
        "Prompt tokens whose keys and values came from the prefix cache.",
        m.prompt_tokens_cached as f64,
    );
    let read = s.prompt_tokens + m.prompt_tokens_cached;
    let ratio = if read > 0 { m.prompt_tokens_cached as f64 / read as f64 } else { 0.0 };
    single(
        &mut out,
        "baton_prefix_cache_hit_ratio",
        "gauge",
        "Share of the prompt tokens so far that came from the prefix cache.",
        ratio,
    );
    single(
        &mut out,
        "baton_prompt_cache_ram_prompts",
        "gauge",
        "Prompts whose keys and values host memory holds (--cache-ram).",
        m.cache_ram_prompts as f64,
    );
    single(
        &mut out,
        "baton_prompt_cache_ram_bytes",
        "gauge",
        "Bytes of those keys and values.",
        m.cache_ram_bytes as f64,
    );
    single(&mut out, "baton_generated_tokens_total", "counter", "Tokens generated.", s.generated_tokens as f64);
    single(
        &mut out,
        "baton_drafted_tokens_total",
        "counter",
        "Drafted tokens verified (speculative decoding).",
        m.drafted_tokens as f64,
    );
    single(
        &mut out,
        "baton_draft_accepted_tokens_total",
        "counter",
        "Drafted tokens accepted (each the token decoding without drafts gives).",
        m.accepted_tokens as f64,
    );
    single(
        &mut out,
        "baton_kv_preemptions_total",
        "counter",
        "Running sequences preempted for the blocks of a full KV pool (each reads its text again when readmitted).",
        m.kv_preemptions as f64,
    );
    single(
        &mut out,
        "baton_generated_tokens_per_second",
        "gauge",
        "Tokens generated per second over the last 10 seconds.",
        m.tokens_per_second,
    );
    histogram(
        &mut out,
        "baton_time_to_first_token_seconds",
        "From a request's submission to its first generated token.",
        &m.time_to_first_token,
    );
    histogram(
        &mut out,
        "baton_inter_token_latency_seconds",
        "Between two generated tokens of one request.",
        &m.inter_token_latency,
    );
    let used = s.running.min(m.slots);
    single(&mut out, "baton_kv_slots_used", "gauge", "Sequence slots of the KV cache in use.", used as f64);
    single(&mut out, "baton_kv_slots_free", "gauge", "Sequence slots of the KV cache free.", (m.slots - used) as f64);
    let [pool, used, shared, held, holders, block_bytes] = m.kv_blocks.map(|b| b as f64);
    let blocks = [
        ("baton_kv_blocks_total", "Blocks of 64 positions in the paged KV cache's pool (0: not paged).", pool),
        ("baton_kv_blocks_used", "Blocks some sequence holds.", used),
        ("baton_kv_blocks_free", "Blocks no sequence holds.", pool - used),
        ("baton_kv_blocks_shared", "Blocks several sequences hold (a shared prefix, held once).", shared),
        ("baton_kv_blocks_held", "Blocks the sequences hold, a shared one counted per holder.", held),
        ("baton_kv_bytes_used", "Bytes of the paged KV cache's blocks in use (all layers).", used * block_bytes),
        ("baton_kv_sequences_holding", "Sequence slots holding blocks (running or cached).", holders),
    ];
    for (name, help, value) in blocks {
        single(&mut out, name, "gauge", help, value);
    }
    single(
        &mut out,
        "baton_kv_positions_used",
        "gauge",
        "KV cache positions the running requests hold.",
        m.kv_positions_used as f64,
    );
    single(
        &mut out,
        "baton_kv_positions_total",
        "gauge",
        "KV cache positions of all slots.",
        m.kv_positions_total as f64,
    );
    single(&mut out, "baton_steps_total", "counter", "Batched forward passes.", s.steps as f64);
    single(
        &mut out,
        "baton_host_waits_total",
        "counter",
        "Times the host blocked on the devices.",
        s.host_waits as f64,
    );
    let per_step = if s.steps > 0 { s.host_waits as f64 / s.steps as f64 } else { 0.0 };
    single(&mut out, "baton_host_waits_per_step", "gauge", "Host waits per step so far.", per_step);
    single(&mut out, "baton_engine_panics_total", "counter", "Panics caught in the engine's turns.", s.panics as f64);
    llama_server::render(&mut out, m);
    out
}

mod exposition;
mod llama_server;
#[cfg(test)]
mod tests;
