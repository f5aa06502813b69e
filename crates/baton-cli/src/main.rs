//! `baton`: run, benchmark and inspect llama-family models on Baton.
//!
//! The top of the dependency picture: it depends on baton-model and baton-gen (through
//! it on the scheduler, the composite device and the core), opens devices
//! through baton-load's device registry, and runs baton-conformance's suite; nothing
//! depends on it. The sources follow the commands: `cli/` holds the
//! arguments several commands share (clap `ValueEnum`s for every choice),
//! `cmd/` one module per command (`cmd/bench/` the model benchmark; the
//! sub-benchmarks and the load generator are the `baton-bench` library), and
//! `util/` what is not a command (Ctrl-C, JSON strings).

mod cli;
mod cmd;
mod util;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Parser, Subcommand};

use crate::cmd::{bench, conformance, devices, model, perplexity, plan, run, serve};
use crate::util::interrupt;

/// Baton: an asynchronous multi-device runtime for tensor graphs, proven on
/// llama-family GGUF models.
#[derive(Parser)]
#[command(name = "baton", version, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate text from a prompt, or chat with an instruct model.
    ///
    /// Examples:
    ///   baton run -p "Once upon a time"            (default model: SmolLM2-135M-Instruct Q4_1)
    ///   baton run -m model.gguf -p "Hello" -n 64 --temp 0.7 --seed 42 -t 2
    ///   baton run --chat                           (a conversation on stdin; /exit or EOF ends)
    ///   baton run -cnv -sys "Answer briefly." -p "What is the capital of France?"
    Run(Box<run::RunArgs>),
    /// Serve a model over HTTP with the OpenAI API (chat and text
    /// completions), batching concurrent requests.
    ///
    /// Examples:
    ///   baton serve                                (SmolLM2-135M-Instruct on 127.0.0.1:8080)
    ///   baton serve -m model.gguf --port 8000 --parallel 8 -c 2048
    ///   baton serve --devices cpu:0,cpu:1 -sm layer --parallel 8
    Serve(Box<serve::ServeArgs>),
    /// Measure prompt processing and generation speed (llama-bench style),
    /// or the hand-offs of the wait policies (`bench sync`, `bench gates`).
    ///
    /// Examples:
    ///   baton bench -p 512 -n 128 -r 5
    ///   baton bench -m model.gguf -p 64 -n 64 --json
    ///   baton bench --devices cpu:0,cpu:1 -p 512 -ub 64 --n-copies 2
    ///   baton bench sync --json
    ///   baton bench gates
    Bench(bench::BenchArgs),
    /// Perplexity of a model on a text file (llama.cpp's method).
    ///
    /// Example:
    ///   baton perplexity -f /usr/share/common-licenses/GPL-3 -c 256 --chunks 4
    Perplexity(perplexity::PerplexityArgs),
    /// Show how a model is split over devices: splits, copies, sync paths.
    ///
    /// Example:
    ///   baton plan --devices cpu:0,cpu:1 --split-mode layer -p 64
    Plan(plan::PlanArgs),
    /// Run the conformance suite (the async contract and op numerics)
    /// against this machine's devices.
    ///
    /// Examples:
    ///   baton conformance --devices cpu:0,cpu:1
    ///   baton conformance --devices vulkan:0
    ///   baton conformance --devices vulkan:0,vulkan:0   (W-ORDER, M-ORDER: expected failures)
    ///   baton conformance --devices cpu:0,cpu:1 -sm tensor   (the composite backend)
    Conformance(conformance::ConformanceArgs),
    /// List the devices of this machine and what they offer.
    Devices(devices::DevicesArgs),
    /// Make, fetch or inspect model files.
    #[command(subcommand)]
    Model(model::ModelCommand),
}

/// llama.cpp's multi-letter short flags, spelled as clap's long ones.
const LLAMA_SHORTS: [(&str, &str); 19] = [
    ("-ub", "--ubatch-size"),
    ("-sm", "--split-mode"),
    ("-ts", "--tensor-split"),
    ("-cnv", "--conversation"),
    ("-sys", "--system-prompt"),
    ("-np", "--parallel"),
    ("-ctk", "--cache-type-k"),
    ("-ctv", "--cache-type-v"),
    ("-ctxcp", "--ctx-checkpoints"),
    ("-ot", "--override-tensor"),
    ("-ncmoe", "--n-cpu-moe"),
    ("-md", "--model-draft"),
    ("-devd", "--device-draft"),
    ("-ngl", "--n-gpu-layers"),
    ("-fa", "--flash-attn"),
    ("-tb", "--threads-batch"),
    ("-cb", "--cont-batching"),
    ("-nocb", "--no-cont-batching"),
    ("-to", "--timeout"),
];

fn main() {
    let args = std::env::args().map(|a| match LLAMA_SHORTS.iter().find(|(short, _)| *short == a) {
        Some((_, long)) => long.to_string(),
        None => a,
    });
    let cli = parse(args);
    interrupt::install();
    let result = match cli.command {
        Command::Run(args) => run::run(*args),
        Command::Serve(args) => serve::run(*args),
        Command::Bench(args) => bench::run(args),
        Command::Perplexity(args) => perplexity::run(args),
        Command::Plan(args) => plan::run(args),
        Command::Conformance(args) => conformance::run(args),
        Command::Devices(args) => devices::run(args),
        Command::Model(cmd) => model::run(cmd),
    };
    // Devices may still be tearing down on their streams' threads (Vulkan's);
    // exiting under them can crash a driver's own teardown.
    baton_load::registry::wait_for_teardown(std::time::Duration::from_secs(5));
    if let Err(e) = result {
        if e.downcast_ref::<util::reported::Reported>().is_none() {
            util::reported::print_error(&describe(&e));
        }
        std::process::exit(1);
    }
}

/// Parses the command line. A value outside an argument's choices exits
/// with code 1, as every other bad input does (and as the hand-written
/// checks those choices replaced did); clap's other usage errors keep its 2.
fn parse(args: impl IntoIterator<Item = String>) -> Cli {
    match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) if e.kind() == ErrorKind::InvalidValue && has_choices(&e) => {
            let _ = e.print();
            std::process::exit(1);
        }
        Err(e) => e.exit(),
    }
}

/// Whether the argument of a clap error has a list of choices.
fn has_choices(e: &clap::Error) -> bool {
    matches!(e.get(ContextKind::ValidValue), Some(ContextValue::Strings(choices)) if !choices.is_empty())
}

/// The error and its causes, each once (library errors often repeat their
/// source in their own message).
fn describe(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// clap's own check of the whole command line: no two arguments share a
    /// flag, every default is one of its choices, every reference resolves.
    #[test]
    fn the_command_line_is_well_formed() {
        super::Cli::command().debug_assert();
    }
}
