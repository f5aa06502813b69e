//! `baton model memory`: where a model's memory goes, phase by phase, and
//! its peak against the budget (the file, its KV cache, io and scratch).

use anyhow::{ensure, Context, Result};
use baton_model::{Model, ModelMemory};
use clap::Args;

use crate::cli::args::ModelArgs;
use crate::util::json::json_str;

/// Share of the file's size the weights may take beyond it (packed forms'
/// padding, the tokenizer, page rounding).
pub const FILE_SLACK: f64 = 1.1;

/// Arguments of `baton model memory`.
#[derive(Args)]
pub struct MemoryArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Tokens of the prompt evaluated after the first step (random ids).
    #[arg(short = 'p', long = "prompt-tokens", default_value_t = 64)]
    prompt_tokens: usize,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Exit with an error when the peak is above the budget.
    #[arg(long)]
    check: bool,
}

/// The process's memory from `/proc/self/status`, in bytes.
#[derive(Clone, Copy, Debug, Default)]
struct Status {
    peak: u64,
    resident: u64,
    anon: u64,
    file: u64,
}

fn status() -> Status {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kb| kb.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    Status { peak: field("VmHWM:"), resident: field("VmRSS:"), anon: field("RssAnon:"), file: field("RssFile:") }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

/// Runs `baton model memory`.
pub fn run(args: MemoryArgs) -> Result<()> {
    let before = status();
    ensure!(before.peak > 0, "this system has no /proc/self/status to read memory from");
    let mut model = args.model.load().context("load")?;
    let loaded = status();
    model.warm_up().context("first step")?;
    let stepped = status();
    let vocab = model.config().vocab as u64;
    let room = model.context().saturating_sub(1).min(args.prompt_tokens);
    let prompt: Vec<u32> = (0..room as u64).map(|i| ((i * 2_654_435_761 + 7) % vocab) as u32).collect();
    if !prompt.is_empty() {
        model.eval_prompt(&prompt, 0).context("prompt")?;
    }
    let prompted = status();
    let memory = model.memory();
    let budget = budget(&memory, before.resident);
    let phases = [("start", before), ("loaded", loaded), ("first step", stepped), ("prompt", prompted)];
    if args.json {
        print_json(&memory, &phases, budget, prompt.len());
    } else {
        print_table(&model, &memory, &phases, budget, prompt.len());
    }
    if args.check {
        ensure!(
            prompted.peak <= budget,
            "peak RSS {:.1} MiB is above the budget of {:.1} MiB",
            mib(prompted.peak),
            mib(budget)
        );
    }
    Ok(())
}

/// What the process may hold at its peak: what it held before loading (its
/// code), the file with its slack, the KV cache, io and scratch.
fn budget(memory: &ModelMemory, start: u64) -> u64 {
    start + (memory.file as f64 * FILE_SLACK) as u64 + memory.kv_cache + memory.io + memory.scratch()
}

fn print_table(model: &Model, memory: &ModelMemory, phases: &[(&str, Status)], budget: u64, prompt: usize) {
    let cpu = model.device().info().description.clone();
    println!("model memory on {cpu} (prompt of {prompt} tokens)");
    println!("{:<12} {:>10} {:>10} {:>10} {:>10}", "phase", "peak MiB", "rss MiB", "anon MiB", "file MiB");
    for (name, s) in phases {
        println!(
            "{name:<12} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
            mib(s.peak),
            mib(s.resident),
            mib(s.anon),
            mib(s.file)
        );
    }
    println!("file               {:>10.1} MiB", mib(memory.file));
    println!(
        "weights mapped     {:>10.1} MiB (read in place; pages given back once packed)",
        mib(memory.weights_mapped)
    );
    println!("weights copied     {:>10.1} MiB", mib(memory.weights_copied));
    println!("packed weights     {:>10.1} MiB", mib(memory.devices.derived));
    println!("KV cache           {:>10.1} MiB", mib(memory.kv_cache));
    println!("io buffers         {:>10.1} MiB", mib(memory.io));
    println!("scratch            {:>10.1} MiB (activations)", mib(memory.scratch()));
    let peak = phases.last().map_or(0, |(_, s)| s.peak);
    println!(
        "peak {:.1} MiB against a budget of {:.1} MiB (start + {FILE_SLACK} x file + KV + io + scratch): {:.2}x",
        mib(peak),
        mib(budget),
        peak as f64 / budget.max(1) as f64
    );
}

fn print_json(memory: &ModelMemory, phases: &[(&str, Status)], budget: u64, prompt: usize) {
    let phases: Vec<String> = phases
        .iter()
        .map(|(name, s)| {
            format!(
                "{{\"phase\":{},\"peak\":{},\"rss\":{},\"anon\":{},\"file\":{}}}",
                json_str(name),
                s.peak,
                s.resident,
                s.anon,
                s.file
            )
        })
        .collect();
    println!(
        "{{\"file\":{},\"weights_mapped\":{},\"weights_copied\":{},\"packed\":{},\"kv_cache\":{},\"io\":{},\"scratch\":{},\"budget\":{budget},\"prompt_tokens\":{prompt},\"phases\":[{}]}}",
        memory.file,
        memory.weights_mapped,
        memory.weights_copied,
        memory.devices.derived,
        memory.kv_cache,
        memory.io,
        memory.scratch(),
        phases.join(",")
    );
}
