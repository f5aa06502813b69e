//! `baton bench`: llama-bench's table: prompt processing (`pp`, one batch of
//! `-p` tokens) and generation (`tg`, `-n` tokens one at a time, each
//! waiting for its logits), as mean ± standard deviation over `-r` runs.
//! With `--roofline`, the machine's STREAM triad bandwidth is measured
//! before each tg repetition (the host's bandwidth moves by tens of percent
//! within minutes on a shared machine, so each repetition is set against
//! its own) and each tg row also says what share of the bandwidth roofline
//! it reaches: bytes read per token (the weights, and at a depth the keys
//! and values attended: `Model::decode_kv_bytes` at the tg's middle
//! position) times tokens per second, over the bandwidth, as mean ±
//! standard deviation of the repetitions' shares.

use std::time::Instant;

use anyhow::Result;
use baton_gen::{Sampler, SamplingParams};
use baton_model::{Logits, Model, SeqStep};
use clap::Args;

use crate::cli::args::ModelArgs;
use baton_bench::stats::mean_std;

/// Arguments of the model benchmark (`baton bench` without a sub-command).
#[derive(Args)]
pub struct ModelBenchArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Prompt tokens of the pp test (0 = skip).
    #[arg(short = 'p', long = "n-prompt", default_value_t = 512)]
    n_prompt: usize,
    /// Generated tokens of the tg test (0 = skip).
    #[arg(short = 'n', long = "n-gen", default_value_t = 128)]
    n_gen: usize,
    /// Positions already in the KV cache when each test runs (llama-bench's
    /// `-d`): prompts and generated tokens attend over them too.
    #[arg(short = 'd', long = "n-depth", default_value_t = 0)]
    n_depth: usize,
    /// Repetitions of each test.
    #[arg(short = 'r', long = "repetitions", default_value_t = 5)]
    repetitions: usize,
    /// Print one JSON object per test instead of the table.
    #[arg(long)]
    json: bool,
    /// Also measure the memory bandwidth (STREAM triad, as many threads as
    /// the model's devices) before each tg repetition and give tg as a
    /// share of the roofline.
    #[arg(long)]
    roofline: bool,
    /// Time every op of the tg runs on the CPU devices and print where a
    /// decoded token's time goes (op, weight type: µs per token, share).
    #[arg(long)]
    op_profile: bool,
    /// Sequences decoded together in the tg test, as `baton serve
    /// --parallel` runs them: each step takes one token of every sequence
    /// and gives every sequence's logits (llama-batched-bench's shape).
    /// t/s counts the tokens of all of them; the test is named `tg64 x8`.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    parallel: u16,
}

struct TestResult {
    name: String,
    n_prompt: usize,
    n_gen: usize,
    /// Sequences decoded together (`--parallel`; 1 for pp).
    parallel: usize,
    samples: Vec<f64>,
    /// The STREAM triad (GB/s) measured just before each sample (tg with
    /// `--roofline` only; empty otherwise).
    triads: Vec<f64>,
    /// Host blocking waits per generated token (tg only).
    host_waits_per_token: Option<f64>,
    /// Host microseconds per token spent submitting (tg only).
    sched_us_per_token: Option<f64>,
}

/// Tokens of the warm-up prompt before `-p` is timed (as long as `-p`, at
/// most this).
const WARM_UP_PROMPT: usize = 512;

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

fn prompt_run(model: &mut Model, prompt: &[u32], depth: usize) -> Result<f64> {
    let start = Instant::now();
    model.eval_prompt(prompt, depth)?;
    Ok(prompt.len() as f64 / start.elapsed().as_secs_f64())
}

fn gen_run(model: &mut Model, n: usize, first: u32, depth: usize) -> Result<f64> {
    let vocab = model.config().vocab;
    let start = Instant::now();
    let mut token = first;
    let mut sampler = Sampler::new(SamplingParams::greedy());
    for past in depth..depth + n {
        token = greedy(&mut sampler, model.eval(&[token], past, Logits::Last)?).min(vocab as u32 - 1);
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

/// `n` steps of `parallel` sequences (slots `0..parallel`) each decoding
/// one token, greedy, every step reading every sequence's logits; tokens
/// per second over all of them.
fn parallel_run(model: &mut Model, n: usize, parallel: usize, depth: usize) -> Result<f64> {
    let vocab = model.config().vocab;
    let start = Instant::now();
    let mut next: Vec<u32> = (0..parallel as u32).map(|s| 1 + s % vocab as u32).collect();
    let mut sampler = Sampler::new(SamplingParams::greedy());
    for past in depth..depth + n {
        let steps: Vec<[u32; 1]> = next.iter().map(|&t| [t]).collect();
        let seqs: Vec<SeqStep<'_>> =
            steps.iter().enumerate().map(|(slot, tokens)| SeqStep { slot, past, tokens }).collect();
        let ticket = model.submit_batch(&seqs)?;
        let logits = model.batch_logits(ticket)?;
        for (row, token) in logits.chunks_exact(vocab).zip(&mut next) {
            *token = greedy(&mut sampler, row);
        }
    }
    Ok((n * parallel) as f64 / start.elapsed().as_secs_f64())
}

/// The greedy token of a row of logits as the server draws it (the largest,
/// the lowest id of ties), so that a run depends on the model like a real
/// decode and reads the logits as `baton serve` does; 0 for a row the
/// sampler refuses (NaN, every logit -inf).
fn greedy(sampler: &mut Sampler, row: &[f32]) -> u32 {
    sampler.sample(row).unwrap_or(0)
}

/// Runs `baton bench` on a model.
pub fn run(args: ModelBenchArgs) -> Result<()> {
    let mut margs = args.model.clone();
    let depth = args.n_depth;
    let needed = depth + args.n_prompt.max(args.n_gen).max(1);
    margs.context = Some(margs.context.unwrap_or(0).max(needed));
    let parallel = usize::from(args.parallel);
    let mut model = margs.load_slots(parallel)?;
    let vocab = model.config().vocab;
    let mut results = Vec::new();
    let reps = args.repetitions.max(1);
    // The cache's first `depth` positions, filled once: the tests write
    // only after them.
    if depth > 0 {
        model.eval_prompt(&tokens(depth, vocab, 11), 0)?;
        for slot in 1..parallel {
            if !model.copy_prefix(0, slot, depth)? {
                anyhow::bail!("the depth's {depth} positions could not be copied to sequence {slot}");
            }
        }
    }
    let at_depth = if depth > 0 { format!(" @ d{depth}") } else { String::new() };
    if args.n_prompt > 0 {
        let prompt = tokens(args.n_prompt, vocab, 7);
        // Warm-up: at most 512 tokens, enough to pack every weight and
        // bring the pages in; a full 16k-token warm-up would double the run.
        prompt_run(&mut model, &prompt[..prompt.len().min(WARM_UP_PROMPT)], depth)?;
        let samples = (0..reps).map(|_| prompt_run(&mut model, &prompt, depth)).collect::<Result<Vec<_>>>()?;
        results.push(TestResult {
            name: format!("pp{}{at_depth}", args.n_prompt),
            n_prompt: args.n_prompt,
            n_gen: 0,
            parallel: 1,
            samples,
            triads: Vec::new(),
            host_waits_per_token: None,
            sched_us_per_token: None,
        });
    }
    if args.n_gen > 0 {
        let run = |model: &mut Model, n: usize| match parallel {
            1 => gen_run(model, n, 1, depth),
            _ => parallel_run(model, n, parallel, depth),
        };
        run(&mut model, args.n_gen.min(8))?; // warm-up
        if let (true, Some((device, _))) = (margs.sync_profile, model.tensor_parallel()) {
            device.gate_profile().enable(true); // the gates of the measured tokens only
        }
        let (waits0, submit0) = (model.host_waits(), model.host_submit_time());
        baton_cpu::profile::reset();
        baton_cpu::profile::set_enabled(args.op_profile);
        let threads = model.placement().0.iter().map(|d| d.info().threads).sum();
        let mut triads = Vec::new();
        let samples = (0..reps)
            .map(|_| {
                if args.roofline {
                    // Beside the run it is set against, outside its timing.
                    baton_cpu::profile::set_enabled(false);
                    triads.push(baton_bench::memory::measure(threads, 256, 3).triad);
                    baton_cpu::profile::set_enabled(args.op_profile);
                }
                run(&mut model, args.n_gen)
            })
            .collect::<Result<Vec<_>>>();
        baton_cpu::profile::set_enabled(false);
        let samples = samples?;
        let tokens = (reps * args.n_gen * parallel) as f64;
        let times = if parallel > 1 { format!(" x{parallel}") } else { String::new() };
        results.push(TestResult {
            name: format!("tg{}{times}{at_depth}", args.n_gen),
            n_prompt: 0,
            n_gen: args.n_gen,
            parallel,
            samples,
            triads,
            host_waits_per_token: Some((model.host_waits() - waits0) as f64 / tokens),
            sched_us_per_token: Some((model.host_submit_time() - submit0).as_secs_f64() * 1e6 / tokens),
        });
    }
    margs.finish_trace(&model)?;
    let config = model.config().clone();
    let model_name = format!(
        "{} {} {}",
        config.arch,
        human_params(config.n_params()),
        margs.model.as_ref().map_or("SmolLM2-135M-Instruct Q4_1".to_string(), |p| p
            .file_name()
            .map_or(String::new(), |f| f.to_string_lossy().into_owned()))
    );
    let (devices, _) = model.placement();
    let threads: usize = devices.iter().map(|d| d.info().threads).sum();
    let backend = model.device().info().backend.to_uppercase();
    let size = model.file_bytes();
    // The triads measured beside the tg runs.
    let triads: Vec<f64> = results.iter().flat_map(|r| r.triads.iter().copied()).collect();
    let bandwidth = (args.roofline && !triads.is_empty()).then(|| mean_std(&triads).0);
    let weight_bytes = model.decode_weight_bytes() as f64;
    // Each generated token attends over the depth and the tokens before it:
    // the keys and values of the tg's middle position, on average.
    let kv_bytes = if args.n_gen > 0 { model.decode_kv_bytes(depth + args.n_gen / 2) as f64 } else { 0.0 };
    let token_bytes = weight_bytes + kv_bytes;
    // Share of the roofline: bytes a token reads times tokens per second,
    // over the bandwidth (tg rows only).
    // Each repetition against the triad measured just before it: mean and
    // standard deviation of the shares.
    let roofline = |r: &TestResult| -> Option<(f64, f64)> {
        // A step of `parallel` sequences reads the weights once, and each
        // sequence's keys and values.
        let bytes = weight_bytes / r.parallel as f64 + kv_bytes;
        let shares: Vec<f64> = r.samples.iter().zip(&r.triads).map(|(ts, bw)| bytes * ts / (bw * 1e9)).collect();
        (r.n_gen > 0 && !shares.is_empty()).then(|| mean_std(&shares))
    };
    if args.json {
        for r in &results {
            let (mean, std) = mean_std(&r.samples);
            let samples: Vec<String> = r.samples.iter().map(|s| format!("{s:.3}")).collect();
            let opt = |v: Option<f64>| v.map_or("null".to_string(), |v| format!("{v:.3}"));
            println!(
                "{{\"model\":\"{model_name}\",\"size_bytes\":{size},\"n_params\":{},\"backend\":\"{backend}\",\"devices\":\"{}\",\"split_mode\":\"{}\",\"n_copies\":{},\"sync_copies\":{},\"ubatch\":{},\"threads\":{threads},\"test\":\"{}\",\"n_prompt\":{},\"n_gen\":{},\"parallel\":{},\"n_depth\":{depth},\"avg_ts\":{mean:.3},\"stddev_ts\":{std:.3},\"samples_ts\":[{}],\"host_waits_per_token\":{},\"sched_us_per_token\":{},\"decode_weight_bytes\":{weight_bytes},\"decode_kv_bytes\":{kv_bytes},\"triad_gbs\":{},\"roofline_share\":{}}}",
                config.n_params(),
                margs.devices,
                margs.split_mode,
                margs.n_copies,
                margs.sync_copies,
                margs.batch,
                r.name,
                r.n_prompt,
                r.n_gen,
                r.parallel,
                samples.join(","),
                opt(r.host_waits_per_token),
                opt(r.sched_us_per_token),
                opt(bandwidth),
                opt(roofline(r).map(|(share, _)| share))
            );
        }
        return Ok(());
    }
    let extra = if bandwidth.is_some() { " roofline |" } else { "" };
    println!("| model | size | params | backend | threads | test | t/s |{extra}");
    println!("| --- | ---: | ---: | --- | ---: | ---: | ---: |{}", if bandwidth.is_some() { " ---: |" } else { "" });
    for r in &results {
        let (mean, std) = mean_std(&r.samples);
        let share = match (bandwidth, roofline(r)) {
            (Some(_), Some((share, std))) => format!(" {:.0}% ± {:.0} |", share * 100.0, std * 100.0),
            (Some(_), None) => " |".to_string(),
            _ => String::new(),
        };
        println!(
            "| {model_name} | {:.2} MiB | {:.2} M | {backend} | {threads} | {} | {mean:.2} ± {std:.2} |{share}",
            size as f64 / (1 << 20) as f64,
            config.n_params() as f64 / 1e6,
            r.name
        );
    }
    if args.op_profile && args.n_gen > 0 {
        let tokens = (reps * args.n_gen * parallel) as f64;
        // The mean time per token over all tg runs (not 1 / mean rate).
        let samples = &results[results.len() - 1].samples;
        let token_us = 1e6 * samples.iter().map(|ts| 1.0 / ts).sum::<f64>() / samples.len() as f64;
        print_op_profile(tokens, token_us);
    }
    if let Some(bw) = bandwidth {
        let kv =
            if kv_bytes > 0.0 { format!(" and {:.1} MB of keys and values", kv_bytes / 1e6) } else { String::new() };
        let (low, high) = triads.iter().fold((f64::INFINITY, 0.0f64), |(l, h), &t| (l.min(t), h.max(t)));
        println!(
            "\nroofline: {:.1} MB of weights{kv} per token; STREAM triad {low:.2}-{high:.2} GB/s before the tg runs ({threads} threads): at most {:.0} t/s at their mean",
            weight_bytes / 1e6,
            bw * 1e9 / token_bytes
        );
    }
    Ok(())
}

/// The op table of the tg runs: per op kind, calls and µs per token and the
/// share of the token's wall time (`token_us`); the rest is time outside
/// the ops (scheduling, synchronisation, sampling, the host).
fn print_op_profile(tokens: f64, token_us: f64) {
    let rows = baton_cpu::profile::snapshot();
    println!("\nwhere a decoded token's {token_us:.0} µs go (CPU ops, wall time on the stream):");
    println!("| op | calls/token | µs/token | share |");
    println!("| --- | ---: | ---: | ---: |");
    let mut total = 0.0;
    for (key, time) in &rows {
        let us = time.time.as_secs_f64() * 1e6 / tokens;
        total += us;
        println!("| {key} | {:.1} | {us:.1} | {:.1}% |", time.calls as f64 / tokens, 100.0 * us / token_us);
    }
    let rest = token_us - total;
    println!("| outside ops (scheduling, sync, sampling) | | {rest:.1} | {:.1}% |", 100.0 * rest / token_us);
}

fn human_params(n: u64) -> String {
    if n >= 1_000_000_000 {
        format!("{:.1}B", n as f64 / 1e9)
    } else {
        format!("{}M", (n as f64 / 1e6).round())
    }
}
