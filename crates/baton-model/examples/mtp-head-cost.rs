//! What a multi-token-prediction head's draft row costs beside a one-row
//! step of its model, side by side in one run: the head multiplying its
//! output by the file's bytes, and by the loaded model's own copy of the
//! matrix (`MtpHead::share_output`: the CPU's packed copy), each against
//! `Model::eval` of one token, alternated, with the process's resident
//! memory after each (the file's pages of the output matrix, which the
//! CPU gave back once packed, come back when the head reads them).
//!
//! Usage: `mtp-head-cost MODEL.gguf [ROUNDS] [both|shared|file]` (a Qwen
//! 3.5 file with its prediction block, e.g. `baton model synth --shape
//! qwen35moe-a3b-8l --type q4_k_m --layers 2`). Prints the CPU, then per
//! round the milliseconds of a step and of a draft row each way, and
//! medians; with `shared` or `file` only that head runs, so the resident
//! memory printed is that way's alone.

use std::time::Instant;

use baton_core::backend::Device;
use baton_core::DType;
use baton_model::{LoadOptions, Logits, Model, MtpHead};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, path, rest @ ..] = &args[..] else {
        return Err("usage: mtp-head-cost MODEL.gguf [ROUNDS]".into());
    };
    let rounds: usize = rest.first().map_or(Ok(5), |n| n.parse())?;
    let mode = rest.get(1).map_or("both", String::as_str);
    let (run_shared, run_file) = match mode {
        "both" => (true, true),
        "shared" => (true, false),
        "file" => (false, true),
        other => return Err(format!("{other}: both, shared or file").into()),
    };
    let device = baton_cpu::open(&["cpu"])?.remove(0);
    println!("{} ({} threads)", device.info().description, device.info().threads);
    let options = LoadOptions { context: Some(256), cache_type: DType::F32, batch: 64, ..LoadOptions::default() };
    let mut model = Model::load(path, device.clone(), &options)?;
    let prompt: Vec<u32> = (0..16).map(|i| (i * 131 + 7) % model.config().vocab as u32).collect();
    let hidden = model.eval_hidden(0, &prompt)?;
    let dim = model.config().dim;
    let last = &hidden[(prompt.len() - 1) * dim..];
    let open = || -> Result<MtpHead, Box<dyn std::error::Error>> {
        let mut head = MtpHead::open(path)?.ok_or("the file holds no prediction block")?;
        head.compute_on(device.clone());
        for (p, t) in prompt.iter().enumerate().skip(1) {
            head.prime(&hidden[(p - 1) * dim..p * dim], *t, p - 1)?;
        }
        Ok(head)
    };
    let mut from_file = open()?;
    let mut shared = open()?;
    let (weights, on) = model.output_weights().ok_or("no single device holds the output")?;
    let sharing = shared.share_output(weights.clone(), on.clone())?;
    println!("head output shared with the model: {sharing}");
    let position = prompt.len() - 1;
    // A hybrid model's states only go forward: each step one position on.
    let step = |model: &mut Model, at: usize| -> Result<f64, Box<dyn std::error::Error>> {
        let start = Instant::now();
        model.eval(&prompt[..1], at, Logits::Last)?;
        Ok(start.elapsed().as_secs_f64() * 1e3)
    };
    let draft = |head: &mut MtpHead| -> Result<f64, Box<dyn std::error::Error>> {
        let start = Instant::now();
        head.forward_hidden(last, prompt[0], position)?;
        Ok(start.elapsed().as_secs_f64() * 1e3)
    };
    let (mut steps, mut files, mut shares) = (Vec::new(), Vec::new(), Vec::new());
    println!("round  step ms  draft ms (model's copy)  draft ms (file)  RSS MB");
    for round in 0..rounds {
        steps.push(step(&mut model, prompt.len() + round)?);
        if run_shared {
            shares.push(draft(&mut shared)?);
        }
        if run_file {
            files.push(draft(&mut from_file)?);
        }
        let (share, file) = (shares.last().copied().unwrap_or(f64::NAN), files.last().copied().unwrap_or(f64::NAN));
        println!("{round:>5}  {:>7.2}  {share:>22.2}  {file:>15.2}  {:>6.0}", steps[round], rss_mb());
    }
    let (step, share, file) = (median(&mut steps), median(&mut shares), median(&mut files));
    println!(
        "median: step {step:.2} ms; draft on the model's copy {share:.2} ms ({:.2} steps), on the file {file:.2} ms ({:.2} steps); model's copy / file {:.2}",
        share / step,
        file / step,
        share / file
    );
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The process's resident memory now (`VmRSS`), in MB; 0 where the kernel
/// does not say.
fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok());
    kb.unwrap_or(0.0) / 1e3
}
