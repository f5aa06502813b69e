//! `baton bench serve`: a load generator for an OpenAI-compatible server on
//! this machine, ours or another (llama.cpp's). For each client count it
//! runs streaming completions (fixed prompts, greedy) and prints aggregate
//! tokens/s, time to first token and inter-token latency (p50/p99); then the
//! longest stall of running streams while a long prompt is prefilled.
//!
//! With `--url` it loads a server that is already running; otherwise it
//! starts `baton serve` as a child process with the model arguments given
//! and stops it at the end. Loopback only; bounded in requests and time.

mod client;
mod load;
mod server;

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use clap::Args;

use client::Endpoint;
use load::{PhaseResult, RequestShape, StallResult};
use server::{ChildServer, ServeCommand};

/// Arguments of `baton bench serve`.
#[derive(Args)]
pub struct ServeBenchArgs {
    /// A server already running on this machine (http://127.0.0.1:PORT);
    /// without it, `baton serve` is started with the model arguments below.
    #[arg(long)]
    url: Option<String>,
    /// Concurrent clients of each phase.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16")]
    clients: Vec<usize>,
    /// Requests per client in each phase.
    #[arg(long = "requests-per-client", default_value_t = 4)]
    requests_per_client: usize,
    /// Tokens generated per request.
    #[arg(long = "max-tokens", default_value_t = 64)]
    max_tokens: usize,
    /// Seconds a phase may take; the requests in flight then finish.
    #[arg(long = "phase-seconds", default_value_t = 120)]
    phase_seconds: u64,
    /// Send `ignore_eos: true` (where the server supports it; the prompts
    /// are open-ended anyway).
    #[arg(long = "ignore-eos")]
    ignore_eos: bool,
    /// The model name to send (llama.cpp's server wants none).
    #[arg(long = "model-name")]
    model_name: Option<String>,
    /// Hold every answer to a JSON object (`response_format: json_object`),
    /// to measure what constrained decoding costs.
    #[arg(long = "json-object", conflicts_with = "json_schema")]
    json_object: bool,
    /// Hold every answer to the JSON Schema in this file
    /// (`response_format: json_schema`), to measure what schema-constrained
    /// decoding costs.
    #[arg(long = "json-schema", value_name = "FILE")]
    json_schema: Option<std::path::PathBuf>,
    /// Hold every answer to the GBNF grammar in this file (llama-server's
    /// `grammar` field).
    #[arg(long = "grammar", value_name = "FILE", conflicts_with_all = ["json_object", "json_schema"])]
    grammar: Option<std::path::PathBuf>,
    /// Words (about one token each) of a text every prompt of the phases
    /// starts with, as a shared system prompt would: what the prefix cache
    /// saves (compare with `--serve-arg --no-prefix-cache`).
    #[arg(long = "shared-prefix-words", default_value_t = 0)]
    shared_prefix_words: usize,
    /// Streams running while the long prompt arrives (0: no stall phase).
    #[arg(long = "stall-streams", default_value_t = 4)]
    stall_streams: usize,
    /// Tokens each of those streams asks for at most.
    #[arg(long = "stall-stream-tokens", default_value_t = 512)]
    stall_stream_tokens: usize,
    /// Words of the long prompt (about one token each).
    #[arg(long = "long-prompt-words", default_value_t = 2000)]
    long_prompt_words: usize,
    /// When this command starts the server: the stall phase again with
    /// `--prefill-chunk` set this large (chunked prefill off; 0: skip).
    #[arg(long = "unchunked-prefill", default_value_t = 4096)]
    unchunked_prefill: usize,
    /// Seconds one response may take.
    #[arg(long = "request-timeout", default_value_t = 300)]
    request_timeout: u64,
    /// Print one JSON object instead of the tables: the arguments, each
    /// phase's figures (`phases`) and each long-prompt run's (`stalls`).
    #[arg(long)]
    json: bool,
    /// Also run each phase with `speculative.n_max` set to this (drafted
    /// tokens a step verifies), right after the same phase without: the
    /// two side by side, and their ratio.
    #[arg(long = "spec-n-max")]
    spec_n_max: Option<usize>,
    /// The server to start when no `--url` is given.
    #[command(flatten)]
    serve: ServeCommand,
}

/// The `response_format` the requests ask for, if any.
fn response_format(args: &ServeBenchArgs) -> Result<Option<serde_json::Value>> {
    if args.json_object {
        return Ok(Some(serde_json::json!({"type": "json_object"})));
    }
    let Some(path) = &args.json_schema else { return Ok(None) };
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let schema: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    Ok(Some(serde_json::json!({"type": "json_schema", "json_schema": {"name": "bench", "schema": schema}})))
}

/// Runs `baton bench serve`.
pub fn run(args: ServeBenchArgs) -> Result<()> {
    ensure!(!args.clients.is_empty() && !args.clients.contains(&0), "--clients must list counts of at least 1");
    ensure!(
        args.requests_per_client >= 1 && args.max_tokens >= 1,
        "--requests-per-client and --max-tokens must be at least 1"
    );
    let shape = RequestShape {
        max_tokens: args.max_tokens,
        ignore_eos: args.ignore_eos,
        model: args.model_name.clone(),
        response_format: response_format(&args)?,
        grammar: args
            .grammar
            .as_ref()
            .map(|path| std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display())))
            .transpose()?,
        shared_prefix: load::shared_prefix(args.shared_prefix_words),
        timeout: Duration::from_secs(args.request_timeout),
        draft_max: None,
    };
    let parallel = args.serve.parallel.unwrap_or_else(|| args.clients.iter().copied().max().unwrap_or(1));
    let mut child = None;
    let endpoint = match &args.url {
        Some(url) => Endpoint::parse(url)?,
        None => {
            let started = ChildServer::start(&args.serve, parallel, &[])?;
            let endpoint = started.endpoint();
            child = Some(started);
            endpoint
        }
    };
    eprintln!(
        "loading {} ({})",
        endpoint.addr(),
        if child.is_some() { "baton serve started here" } else { "a running server" }
    );
    // One request first: lazy allocations and page faults stay out of the figures.
    load::stream_one(&endpoint, &shape, "Hello", 4, |_| true).context("the warm-up request")?;

    let mut phases = Vec::new();
    let drafting = args.spec_n_max.map(|n| RequestShape { draft_max: Some(n), ..shape.clone() });
    for &clients in &args.clients {
        let requests = clients * args.requests_per_client;
        for shape in std::iter::once(&shape).chain(&drafting) {
            let limit = Duration::from_secs(args.phase_seconds);
            let phase = load::run_phase(&endpoint, shape, clients, requests, limit)
                .with_context(|| format!("the phase with {clients} client(s)"))?;
            let drafts = shape.draft_max.map(|n| format!(", speculative.n_max {n}")).unwrap_or_default();
            eprintln!("{clients} client(s){drafts}: {:.1} tokens/s", phase.tokens_per_s);
            phases.push(phase);
        }
    }
    let mut stalls = Vec::new();
    if args.stall_streams > 0 {
        let stall =
            load::run_stall(&endpoint, &shape, args.stall_streams, args.stall_stream_tokens, args.long_prompt_words)
                .context("the long-prompt phase")?;
        stalls.push(("server default".to_owned(), stall));
    }
    drop(child.take());
    if args.url.is_none() && args.stall_streams > 0 && args.unchunked_prefill > 0 {
        let chunk = args.unchunked_prefill.to_string();
        let unchunked = ChildServer::start(&args.serve, parallel, &["--prefill-chunk", &chunk])?;
        let endpoint = unchunked.endpoint();
        load::stream_one(&endpoint, &shape, "Hello", 4, |_| true).context("the warm-up request")?;
        let stall =
            load::run_stall(&endpoint, &shape, args.stall_streams, args.stall_stream_tokens, args.long_prompt_words)
                .context("the long-prompt phase without chunked prefill")?;
        stalls.push((format!("--prefill-chunk {chunk}"), stall));
    }
    if args.json {
        println!("{}", json_report(&args, &phases, &stalls));
    } else {
        print_tables(&args, &phases, &stalls);
    }
    Ok(())
}

/// The figures as one JSON object (`--json`).
fn json_report(args: &ServeBenchArgs, phases: &[PhaseResult], stalls: &[(String, StallResult)]) -> serde_json::Value {
    let phases: Vec<_> = phases
        .iter()
        .map(|p| {
            serde_json::json!({
                "clients": p.clients,
                "speculative_n_max": p.draft_max,
                "requests": p.requests,
                "tokens": p.tokens,
                "tokens_per_s": p.tokens_per_s,
                "ttft_p50_ms": p.ttft_ms.0,
                "ttft_p99_ms": p.ttft_ms.1,
                "itl_p50_ms": p.itl_ms.0,
                "itl_p99_ms": p.itl_ms.1,
                "kv_mib_per_sequence": p.kv_mib_per_sequence,
            })
        })
        .collect();
    let stalls: Vec<_> = stalls
        .iter()
        .map(|(label, s)| {
            serde_json::json!({
                "server": label,
                "streams": s.streams,
                "long_prompt_words": s.prompt_words,
                "prefill_ms": s.prefill_ms,
                "itl_p50_before_ms": s.itl_before_ms,
                "longest_stall_ms": s.longest_stall_ms,
                "streams_ended_before": s.ended_early,
            })
        })
        .collect();
    serde_json::json!({
        "max_tokens": args.max_tokens,
        "requests_per_client": args.requests_per_client,
        "shared_prefix_words": args.shared_prefix_words,
        "phases": phases,
        "stalls": stalls,
    })
}

fn print_tables(args: &ServeBenchArgs, phases: &[PhaseResult], stalls: &[(String, StallResult)]) {
    println!("max_tokens {}, greedy, {} request(s) per client", args.max_tokens, args.requests_per_client);
    println!(
        "| clients | drafts | requests | tokens | tokens/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms | KV MiB/seq |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for p in phases {
        let drafts = p.draft_max.map_or("none".to_string(), |n| n.to_string());
        let kv = p.kv_mib_per_sequence.map_or("-".to_string(), |m| format!("{m:.2}"));
        println!(
            "| {} | {drafts} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {kv} |",
            p.clients, p.requests, p.tokens, p.tokens_per_s, p.ttft_ms.0, p.ttft_ms.1, p.itl_ms.0, p.itl_ms.1
        );
    }
    let rate = |n, drafts: bool| {
        phases.iter().find(|p| p.clients == n && p.draft_max.is_some() == drafts).map(|p| p.tokens_per_s)
    };
    if let (Some(one), Some(eight)) = (rate(1, false), rate(8, false)) {
        println!("8 clients / 1 client: {:.2}x aggregate tokens/s", eight / one);
    }
    // Each drafting phase ran right after its plain one: the pairs' ratios.
    let mut counts: Vec<usize> = args.clients.clone();
    counts.sort_unstable();
    counts.dedup();
    for clients in counts {
        let ratios: Vec<f64> = phases
            .windows(2)
            .filter(|w| w[0].clients == clients && w[0].draft_max.is_none() && w[1].draft_max.is_some())
            .map(|w| w[1].tokens_per_s / w[0].tokens_per_s)
            .collect();
        if !ratios.is_empty() {
            let (mean, std) = crate::stats::mean_std(&ratios);
            let each: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
            println!(
                "{clients} client(s), drafts / none: {mean:.2}x ± {std:.2} aggregate tokens/s over {} pair(s): {}",
                ratios.len(),
                each.join(", ")
            );
        }
    }
    if stalls.is_empty() {
        return;
    }
    println!();
    println!("| server | streams | long prompt words | prefill ms | ITL p50 before ms | longest stall ms | streams ended before |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (label, s) in stalls {
        println!(
            "| {label} | {} | {} | {:.0} | {:.1} | {:.0} | {} |",
            s.streams, s.prompt_words, s.prefill_ms, s.itl_before_ms, s.longest_stall_ms, s.ended_early
        );
    }
}
