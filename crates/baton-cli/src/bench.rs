//! `baton bench`: llama-bench's table: prompt processing (`pp`, one batch of
//! `-p` tokens) and generation (`tg`, `-n` tokens one at a time, each
//! waiting for its logits), as mean ± standard deviation over `-r` runs.

use std::time::Instant;

use anyhow::Result;
use baton_llama::{Logits, Model};
use clap::Args;

use crate::run::ModelArgs;
use crate::stats::mean_std;

/// Arguments of `baton bench`.
#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    /// A synchronisation benchmark instead of a model one.
    #[command(subcommand)]
    kind: Option<crate::bench_sync::BenchKind>,
    #[command(flatten)]
    model: ModelArgs,
    /// Prompt tokens of the pp test (0 = skip).
    #[arg(short = 'p', long = "n-prompt", default_value_t = 512)]
    n_prompt: usize,
    /// Generated tokens of the tg test (0 = skip).
    #[arg(short = 'n', long = "n-gen", default_value_t = 128)]
    n_gen: usize,
    /// Repetitions of each test.
    #[arg(short = 'r', long = "repetitions", default_value_t = 5)]
    repetitions: usize,
    /// Print one JSON object per test instead of the table.
    #[arg(long)]
    json: bool,
}

struct TestResult {
    name: String,
    n_prompt: usize,
    n_gen: usize,
    samples: Vec<f64>,
    /// Host blocking waits per generated token (tg only).
    host_waits_per_token: Option<f64>,
    /// Host microseconds per token spent submitting (tg only).
    sched_us_per_token: Option<f64>,
}

fn tokens(n: usize, vocab: usize, seed: u64) -> Vec<u32> {
    let mut state = seed | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % vocab as u64) as u32
        })
        .collect()
}

fn prompt_run(model: &mut Model, prompt: &[u32]) -> Result<f64> {
    let start = Instant::now();
    model.eval_prompt(prompt, 0)?;
    Ok(prompt.len() as f64 / start.elapsed().as_secs_f64())
}

fn gen_run(model: &mut Model, n: usize, first: u32) -> Result<f64> {
    let vocab = model.config().vocab;
    let start = Instant::now();
    let mut token = first;
    for past in 0..n {
        let logits = model.eval(&[token], past, Logits::Last)?;
        // Greedy, so the run depends on the model like a real decode.
        token = logits.iter().enumerate().fold((0, f32::MIN), |b, (i, &l)| if l > b.1 { (i, l) } else { b }).0 as u32;
        token = token.min(vocab as u32 - 1);
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

/// Runs `baton bench`.
pub fn run(args: BenchArgs) -> Result<()> {
    if let Some(kind) = args.kind {
        return crate::bench_sync::run(kind);
    }
    let mut margs = args.model.clone();
    let needed = args.n_prompt.max(args.n_gen).max(1);
    margs.context = Some(margs.context.unwrap_or(0).max(needed));
    let mut model = margs.load()?;
    let vocab = model.config().vocab;
    let mut results = Vec::new();
    let reps = args.repetitions.max(1);
    if args.n_prompt > 0 {
        let prompt = tokens(args.n_prompt, vocab, 7);
        prompt_run(&mut model, &prompt)?; // warm-up
        let samples = (0..reps).map(|_| prompt_run(&mut model, &prompt)).collect::<Result<Vec<_>>>()?;
        results.push(TestResult {
            name: format!("pp{}", args.n_prompt),
            n_prompt: args.n_prompt,
            n_gen: 0,
            samples,
            host_waits_per_token: None,
            sched_us_per_token: None,
        });
    }
    if args.n_gen > 0 {
        gen_run(&mut model, args.n_gen.min(8), 1)?; // warm-up
        if let (true, Some((device, _))) = (margs.sync_profile, model.tensor_parallel()) {
            device.gate_profile().enable(true); // the gates of the measured tokens only
        }
        let (waits0, submit0) = (model.host_waits(), model.host_submit_time());
        let samples = (0..reps).map(|_| gen_run(&mut model, args.n_gen, 1)).collect::<Result<Vec<_>>>()?;
        let tokens = (reps * args.n_gen) as f64;
        results.push(TestResult {
            name: format!("tg{}", args.n_gen),
            n_prompt: 0,
            n_gen: args.n_gen,
            samples,
            host_waits_per_token: Some((model.host_waits() - waits0) as f64 / tokens),
            sched_us_per_token: Some((model.host_submit_time() - submit0).as_secs_f64() * 1e6 / tokens),
        });
    }
    margs.finish_trace(&model)?;
    let config = model.config().clone();
    let model_name = format!(
        "{} {} {}",
        config.architecture,
        human_params(config.n_params()),
        margs.model.as_ref().map_or("SmolLM2-135M-Instruct Q4_1".to_string(), |p| p
            .file_name()
            .map_or(String::new(), |f| f.to_string_lossy().into_owned()))
    );
    let (devices, _) = model.placement();
    let threads: usize = devices.iter().map(|d| d.info().threads).sum();
    let backend = model.device().info().backend.to_uppercase();
    let size = model.file_bytes();
    if args.json {
        for r in &results {
            let (mean, std) = mean_std(&r.samples);
            let samples: Vec<String> = r.samples.iter().map(|s| format!("{s:.3}")).collect();
            let opt = |v: Option<f64>| v.map_or("null".to_string(), |v| format!("{v:.3}"));
            println!(
                "{{\"model\":\"{model_name}\",\"size_bytes\":{size},\"n_params\":{},\"backend\":\"{backend}\",\"devices\":\"{}\",\"split_mode\":\"{}\",\"n_copies\":{},\"sync_copies\":{},\"ubatch\":{},\"threads\":{threads},\"test\":\"{}\",\"n_prompt\":{},\"n_gen\":{},\"avg_ts\":{mean:.3},\"stddev_ts\":{std:.3},\"samples_ts\":[{}],\"host_waits_per_token\":{},\"sched_us_per_token\":{}}}",
                config.n_params(),
                margs.devices,
                margs.split_mode,
                margs.n_copies,
                margs.sync_copies,
                margs.batch,
                r.name,
                r.n_prompt,
                r.n_gen,
                samples.join(","),
                opt(r.host_waits_per_token),
                opt(r.sched_us_per_token)
            );
        }
        return Ok(());
    }
    println!("| model | size | params | backend | threads | test | t/s |");
    println!("| --- | ---: | ---: | --- | ---: | ---: | ---: |");
    for r in &results {
        let (mean, std) = mean_std(&r.samples);
        println!(
            "| {model_name} | {:.2} MiB | {:.2} M | {backend} | {threads} | {} | {mean:.2} ± {std:.2} |",
            size as f64 / (1 << 20) as f64,
            config.n_params() as f64 / 1e6,
            r.name
        );
    }
    Ok(())
}

fn human_params(n: u64) -> String {
    if n >= 1_000_000_000 {
        format!("{:.1}B", n as f64 / 1e9)
    } else {
        format!("{}M", (n as f64 / 1e6).round())
    }
}
