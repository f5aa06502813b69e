//! `baton bench spec`: decoding with and without speculation, side by side
//! in one run, on tasks whose answers repeat their prompt and one whose
//! answer does not (`spec_tasks.rs`): tokens per second of each, their
//! ratio per pair of runs, the acceptance, and a check that both gave the
//! same tokens. Also what a verification step of `1 + k` rows costs against
//! a step of one row (the adaptive budget's cost model).

use std::time::Instant;

use anyhow::{Context, Result};
use baton_gen::speculative::{
    self, Decoding, Drawn, ModelDrafter, SpecParams, SpecStats, SpecType, Speculation, StepTimes,
};
use baton_gen::{ChatTemplate, Message, Sampler, SamplingParams};
use baton_model::{EncodeOptions, Logits, Model};
use clap::Args;

use super::spec_tasks::tasks;
use crate::cli::args::ModelArgs;
use crate::cli::spec::{speculation, DraftArgs, SpecArgs};
use crate::util::json::json_str;
use crate::util::tokens::ends_generation;
use baton_bench::stats::mean_std;

/// Arguments of `baton bench spec`.
#[derive(Args)]
pub struct SpecBenchArgs {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    spec: SpecArgs,
    #[command(flatten)]
    draft: DraftArgs,
    /// Tokens generated per run, at most (a run also ends at the end of
    /// the answer).
    #[arg(short = 'n', long = "n-gen", default_value_t = 256)]
    n_gen: usize,
    /// Pairs of runs (plain, speculative) per task, their order alternating.
    #[arg(short = 'r', long = "repetitions", default_value_t = 3)]
    repetitions: usize,
    /// Print one JSON object per task instead of the table.
    #[arg(long)]
    json: bool,
}

/// One decoding's tokens, speed and counts.
struct Decoded {
    tokens: Vec<u32>,
    tokens_per_s: f64,
    stats: SpecStats,
}

/// Decoding of up to `n` tokens after `prompt` at `temperature` (0:
/// greedy), with speculation as `spec` says (or none), ending at the end
/// of the answer; its steps timed into `times` (the budget's costs).
fn decode(
    model: &mut Model,
    (prompt, temperature): (&[u32], f32),
    n: usize,
    (mut spec, times): (Option<&mut Speculation>, &mut StepTimes),
) -> Result<Decoded> {
    let tokenizer = model.shared_tokenizer();
    let eos = tokenizer.eos_id();
    let sampling = match temperature {
        0.0 => SamplingParams::greedy(),
        t => SamplingParams { temperature: t, top_k: 40, top_p: 1.0, min_p: 0.0, seed: 17, ..Default::default() },
    };
    let mut sampler = Sampler::new(sampling);
    let mut tokens = Vec::with_capacity(n);
    let mut draw = |row: &[f32]| -> Result<Drawn> {
        let token = sampler.sample(row)?;
        if ends_generation(&tokenizer, token, eos) {
            return Ok(Drawn::End);
        }
        tokens.push(token);
        Ok(Drawn::Token(token))
    };
    let first = draw(speculative::eval_prompt(model, spec.as_deref_mut(), prompt)?)?;
    let start = Instant::now();
    if let Drawn::Token(first) = first {
        let history = prompt.iter().copied().chain([first]).collect();
        let left = n.min(model.context().saturating_sub(prompt.len())).saturating_sub(1);
        let mut decoding = Decoding { model, slot: 0, past: prompt.len(), tokens: history, left, times };
        decoding.run(spec.as_deref_mut(), &crate::util::interrupt::requested, &mut draw)?;
    }
    let seconds = start.elapsed().as_secs_f64();
    let stats = spec.map(|s| s.stats()).unwrap_or_default();
    Ok(Decoded { tokens_per_s: (tokens.len().max(1) - 1) as f64 / seconds.max(1e-9), tokens, stats })
}

/// [`decode`] with a fresh speculation (its acceptance learned from
/// scratch; the step times go on), drafting with `drafter` (taken back
/// after), the head of the file at `path` (`--spec-type mtp`, a fresh
/// head) or n-grams.
fn decode_drafting(
    model: &mut Model,
    input: (&[u32], f32),
    (n, path): (usize, &std::path::Path),
    (params, drafter, times): (SpecParams, &mut Option<ModelDrafter>, &mut StepTimes),
) -> Result<Decoded> {
    let drafter_params = drafter.take().map(|d| (d, params));
    let mut spec = speculation(params, drafter_params, (path, model))?.context("speculation is off")?;
    let decoded = decode(model, input, n, (Some(&mut spec), times));
    *drafter = spec.take_model();
    decoded
}

/// Rows of the steps [`step_ms`] times.
const STEP_ROWS: [usize; 5] = [1, 2, 3, 5, 9];

/// How long a step of each of [`STEP_ROWS`] tokens of one sequence (every
/// row's logits) takes, in ms: the median of 15 steps each, at a depth of
/// 64 positions (a hybrid model that keeps its rows' recurrent states keeps
/// them, as verification steps do).
fn step_ms(model: &mut Model) -> Result<Vec<(usize, f64)>> {
    let vocab = model.config().vocab as u32;
    let tokens: Vec<u32> = (0..80).map(|i| (i * 7919 + 13) % vocab).collect();
    model.eval_prompt(&tokens[..64], 0)?;
    // A hybrid model's recurrent state goes on from where the last step
    // left it: put back before each step, outside the timing.
    let at_64 = model.save_checkpoint(0)?;
    let mut median_ms = |rows: usize| -> Result<f64> {
        let logits = if rows > 1 { Logits::All } else { Logits::Last };
        let mut times = Vec::new();
        for _ in 0..16 {
            if let Some(checkpoint) = &at_64 {
                model.restore_prefix(0, checkpoint)?;
            }
            let start = Instant::now();
            model.eval(&tokens[64..64 + rows], 64, logits)?;
            times.push(start.elapsed().as_secs_f64());
        }
        // The first builds the step's plan.
        times.remove(0);
        times.sort_by(f64::total_cmp);
        Ok(times[times.len() / 2] * 1e3)
    };
    STEP_ROWS.iter().map(|&rows| Ok((rows, median_ms(rows)?))).collect()
}

/// Runs `baton bench spec`.
pub fn run(args: SpecBenchArgs) -> Result<()> {
    let mut params = args.spec.params()?;
    if params.kind == SpecType::None {
        params.kind = SpecType::Ngram;
    }
    let mut model = args.model.load()?;
    let path = args.model.path()?;
    // A hybrid model's steps, before and after it keeps the states after
    // each row (the copies a verification step adds).
    let unkept = match model.rewind_rows() {
        // The first pass reads the weights in (mapped pages, packing).
        Some(_) => Some(step_ms(&mut model).and_then(|_| step_ms(&mut model))?),
        None => None,
    };
    speculative::prepare_model(&mut model, params.draft_max)?;
    // A draft model (`-md`) drafts in place of the n-grams.
    let mut drafter = match args.draft.load(&model, args.model.threads, 1, params)? {
        Some((drafter, with_cost)) => {
            params = with_cost;
            Some(drafter)
        }
        None => None,
    };
    let template = ChatTemplate::for_tokenizer(model.chat_template(), model.tokenizer())?;
    let times = step_ms(&mut model)?;
    let costs: Vec<(usize, f64)> = times.iter().map(|&(rows, ms)| (rows, ms / times[0].1)).collect();
    let cost_line: Vec<String> = costs.iter().map(|(rows, c)| format!("{rows} rows {c:.2}")).collect();
    // A line through the steps of 2 and 9 rows: fixed + per_row × k.
    let cost_of = |rows: usize| costs.iter().find(|(r, _)| *r == rows).map_or(1.0, |(_, c)| *c);
    let per_row = (cost_of(9) - cost_of(2)) / 7.0;
    let fixed = cost_of(2) - 1.0 - per_row;
    if !args.json {
        println!("a step of one sequence's rows against one row: {}", cost_line.join(", "));
        let assumed = speculative::StepCost::MEASURED;
        println!(
            "a step verifying k drafts costs 1 + {fixed:.3} + {per_row:.3} k (the budget assumes 1 + {} + {} k)\n",
            assumed.fixed, assumed.per_row
        );
        if let Some(unkept) = &unkept {
            let each: Vec<String> = (times.iter().zip(unkept))
                .map(|((rows, kept), (_, not))| format!("{rows} rows {kept:.1} / {not:.1} ms ({:.2})", kept / not))
                .collect();
            let rows = params.draft_max.max(1) * model.runs_in_flight().max(1);
            let row_mib = model.kept_state_bytes() as f64 / rows as f64 / (1 << 20) as f64;
            println!(
                "recurrent states kept after each row ({row_mib:.1} MiB a row), with / without: {}",
                each.join(", ")
            );
        }
        println!("| task | tokens | plain t/s | spec t/s | ratio | drafted | accepted | acceptance |");
        println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    }
    // The engine's own step times, kept over every decoding of the run.
    let mut step_times = StepTimes::new(params.cost);
    for task in tasks() {
        let text = template.render(&[Message::user(task.message.clone())], true)?;
        let prompt = model.tokenizer().encode(&text, EncodeOptions { add_special: false, parse_special: true })?;
        let (mut plain, mut spec, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        let mut stats = SpecStats::default();
        let mut generated = 0;
        for rep in 0..args.repetitions.max(1) {
            let input = (prompt.as_slice(), task.temperature);
            let (a, b) = if rep % 2 == 0 {
                let a = decode(&mut model, input, args.n_gen, (None, &mut step_times))?;
                (a, decode_drafting(&mut model, input, (args.n_gen, &path), (params, &mut drafter, &mut step_times))?)
            } else {
                let b =
                    decode_drafting(&mut model, input, (args.n_gen, &path), (params, &mut drafter, &mut step_times))?;
                (decode(&mut model, input, args.n_gen, (None, &mut step_times))?, b)
            };
            if a.tokens != b.tokens {
                let at = a.tokens.iter().zip(&b.tokens).position(|(x, y)| x != y);
                anyhow::bail!("task {}: speculation changed the tokens (first difference at {at:?})", task.name);
            }
            generated = a.tokens.len();
            ratios.push(b.tokens_per_s / a.tokens_per_s);
            plain.push(a.tokens_per_s);
            spec.push(b.tokens_per_s);
            stats.drafted += b.stats.drafted;
            stats.accepted += b.stats.accepted;
            stats.steps += b.stats.steps;
        }
        let ((p, _), (s, _), (r, r_std)) = (mean_std(&plain), mean_std(&spec), mean_std(&ratios));
        if args.json {
            println!(
                "{{\"task\":{},\"tokens\":{generated},\"plain_tokens_per_s\":{p:.2},\"spec_tokens_per_s\":{s:.2},\
                 \"ratio\":{r:.3},\"ratio_std\":{r_std:.3},\"drafted\":{},\"accepted\":{},\"step_fixed\":{fixed:.3},\"step_per_row\":{per_row:.3}}}",
                json_str(task.name),
                stats.drafted,
                stats.accepted
            );
        } else {
            println!(
                "| {} | {generated} | {p:.1} | {s:.1} | {r:.2} ± {r_std:.2} | {} | {} | {:.0}% |",
                task.name,
                stats.drafted,
                stats.accepted,
                100.0 * stats.acceptance()
            );
        }
    }
    if !args.json {
        let timed: Vec<String> = (step_times.timed())
            .map(|(rows, _, samples)| format!("{rows} rows {:.2} ({samples})", step_times.cost(rows)))
            .collect();
        println!("\nthe steps' costs as the runs timed them (timings): {}", timed.join(", "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_alone;

    #[test]
    fn spec_bench_arguments_parse() {
        let args = parse_alone::<SpecBenchArgs>(&["-n", "32", "-r", "2", "--draft-max", "4"]).expect("parses");
        assert_eq!((args.n_gen, args.repetitions, args.spec.draft_max), (32, 2, 4));
    }
}
