//! `baton bench`: the model benchmark (llama-bench's table, `model.rs`),
//! or one of the sub-commands, which the `baton-bench` library runs:
//! `sync` and `gates` (what each wait policy costs), `memory` (the
//! bandwidth), `submit` (the host's cost of a submission), `serve` (a
//! load generator for an OpenAI-compatible server) and `spec` (decoding
//! with and without speculation side by side, `spec.rs`); `constraint`
//! (what a format costs per token, `constraint.rs`) runs here, over
//! `baton-gen`.

mod constraint;
mod model;
mod spec;
mod spec_tasks;

use anyhow::Result;
use baton_bench::{gates, memory, serve, submit, sync};
use clap::{Args, Subcommand};

/// Arguments of `baton bench`.
#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    /// A synchronisation benchmark instead of a model one.
    #[command(subcommand)]
    kind: Option<BenchKind>,
    #[command(flatten)]
    model: model::ModelBenchArgs,
}

/// Which benchmark other than the model's to run.
#[derive(Subcommand)]
pub enum BenchKind {
    /// Hand-off latency (p50/p99) host<->stream and stream<->stream per wait policy.
    ///
    /// Example: baton bench sync --iterations 2000 --json --devices vulkan:0
    Sync(sync::SyncArgs),
    /// All-reduce and all-gather over cpu:0,cpu:1, and the price of spinning.
    ///
    /// Example: baton bench gates --iterations 500 --elements 4096
    Gates(gates::GatesArgs),
    /// Memory bandwidth: STREAM triad and a read-only sum, 1 and N threads.
    ///
    /// Example: baton bench memory --mib 256
    Memory(memory::MemoryArgs),
    /// What a submission costs the host, with one and two submitting threads.
    ///
    /// Example: baton bench submit --items 20000
    Submit(submit::SubmitArgs),
    /// Load on an OpenAI-compatible server: tokens/s, TTFT and ITL per client count.
    ///
    /// Example: baton bench serve -m smollm2 --clients 1,2,4,8,16 --max-tokens 64
    Serve(Box<serve::ServeBenchArgs>),
    /// Decoding with and without speculation, side by side: tokens/s, ratio, acceptance.
    ///
    /// Example: baton bench spec -m smollm2 --spec-type ngram -n 256 -r 3
    Spec(Box<spec::SpecBenchArgs>),
    /// What holding a text to a format costs per token (llguidance: a JSON Schema, a tool call, GBNF).
    ///
    /// Example: baton bench constraint -m SmolLM2-135M-Instruct.Q4_1.gguf --sequences 1,8
    Constraint(constraint::ConstraintBenchArgs),
}

/// Runs `baton bench`.
pub fn run(args: BenchArgs) -> Result<()> {
    match args.kind {
        None => model::run(args.model),
        Some(BenchKind::Sync(args)) => sync::run(args),
        Some(BenchKind::Gates(args)) => gates::run(args),
        Some(BenchKind::Memory(args)) => memory::run(args),
        Some(BenchKind::Submit(args)) => submit::run(args),
        Some(BenchKind::Serve(args)) => serve::run(*args),
        Some(BenchKind::Spec(args)) => spec::run(*args),
        Some(BenchKind::Constraint(args)) => constraint::run(args),
    }
}
