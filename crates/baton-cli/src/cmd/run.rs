//! `baton run`: generate text, streaming tokens as they come.

use std::io::Write;
use std::time::Instant;

use anyhow::{Context, Result};
use baton_gen::speculative::{self, Decoding, Drawn, SpecType, StepTimes};
use baton_model::EncodeOptions;
use clap::Args;

use super::chat::ChatOptions;
use crate::cli::args::{ModelArgs, SamplingArgs};
use crate::cli::llama_flags::LlamaFlags;
use crate::cli::spec::{speculation, DraftArgs, SpecArgs};
use crate::util::tokens::{ends_generation, print_token};

/// Arguments of `baton run`.
#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// The prompt (with --chat: one user message, answered once).
    #[arg(short = 'p', long = "prompt", required_unless_present = "chat")]
    prompt: Option<String>,
    /// Chat with an instruct model through its chat template (`-cnv`):
    /// user turns from stdin (EOF or /exit ends), or one answer to -p.
    #[arg(long = "chat", visible_alias = "conversation")]
    chat: bool,
    /// A system message opening the conversation (`-sys`, with --chat).
    #[arg(long = "system-prompt", requires = "chat")]
    system_prompt: Option<String>,
    /// Tokens to generate (default 128; with --chat, per answer, default
    /// 512). Stops early at end-of-generation tokens (with --chat, at the
    /// end of the turn).
    #[arg(short = 'n', long = "n-predict")]
    n_predict: Option<usize>,
    #[command(flatten)]
    sampling: SamplingArgs,
    #[command(flatten)]
    spec: SpecArgs,
    #[command(flatten)]
    draft: DraftArgs,
    /// Also print special tokens.
    #[arg(long)]
    special: bool,
    /// Write the logits of every evaluation (the prompt's last token, then
    /// each generated token's) to this file, as raw little-endian f32 rows:
    /// for comparing runs bit for bit.
    #[arg(long = "logits-out")]
    logits_out: Option<std::path::PathBuf>,
    #[command(flatten)]
    llama: LlamaFlags,
}

/// Tokens `baton run` generates when `-n` is not given.
const DEFAULT_N_PREDICT: usize = 128;

/// Runs `baton run`.
pub fn run(mut args: RunArgs) -> Result<()> {
    for note in args.llama.apply(&mut args.model.devices).map_err(anyhow::Error::msg)? {
        eprintln!("{note}");
    }
    let spec_params = args.spec.params()?;
    if args.chat {
        if spec_params.kind != SpecType::None {
            eprintln!("--spec-type: --chat decodes without speculation");
        }
        return super::chat::run(&ChatOptions {
            model: &args.model,
            sampling: &args.sampling,
            system_prompt: args.system_prompt.as_deref(),
            prompt: args.prompt.as_deref(),
            n_predict: args.n_predict,
            special: args.special,
        });
    }
    let text = args.prompt.as_deref().context("-p is required (or --chat)")?;
    let load_start = Instant::now();
    let mut model = args.model.load()?;
    let load_s = load_start.elapsed().as_secs_f64();
    let mut sampler = args.sampling.sampler(model.context())?;
    let prompt = model.tokenizer().encode(text, EncodeOptions { add_special: true, parse_special: true })?;
    if prompt.is_empty() {
        anyhow::bail!("the prompt gives no tokens");
    }
    let budget = model.context().saturating_sub(prompt.len());
    let n_predict = args.n_predict.unwrap_or(DEFAULT_N_PREDICT).min(budget);
    for &t in &prompt {
        sampler.accept(t);
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    write!(out, "{text}")?;
    out.flush()?;
    let mut logits_out = match &args.logits_out {
        Some(path) if crate::cli::writes_outputs() => Some(std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        )),
        _ => None,
    };
    let mut keep = |logits: &[f32]| -> Result<()> {
        if let Some(file) = logits_out.as_mut() {
            logits.iter().try_for_each(|x| file.write_all(&x.to_le_bytes()))?;
        }
        Ok(())
    };
    let drafter = args.draft.load(&model, args.model.threads, 1, spec_params)?;
    let mut spec = speculation(spec_params, drafter, (&args.model.path()?, &model))?;
    if spec.is_some() {
        speculative::prepare_model(&mut model, spec_params.draft_max)?;
    }
    let eos = model.tokenizer().eos_id();
    let tokenizer = model.shared_tokenizer();
    let mut decoder = tokenizer.stream_decoder(args.special);
    let mut generated = 0usize;
    // Each position's token, drawn and taken as one token a step does.
    let mut draw = |logits: &[f32]| -> Result<Drawn> {
        keep(logits)?;
        let token = sampler.sample(logits)?;
        if generated == n_predict || ends_generation(&tokenizer, token, eos) {
            return Ok(Drawn::End);
        }
        sampler.accept(token);
        generated += 1;
        print_token(&mut decoder, token, &mut out)?;
        Ok(Drawn::Token(token))
    };
    let prompt_start = Instant::now();
    let first = draw(speculative::eval_prompt(&mut model, spec.as_mut(), &prompt)?)?;
    let prompt_s = prompt_start.elapsed().as_secs_f64();
    let gen_start = Instant::now();
    if let Drawn::Token(first) = first {
        let tokens = prompt.iter().copied().chain([first]).collect();
        let left = n_predict - 1;
        // The budget reads the steps' times as they come.
        let times = &mut StepTimes::new(spec.as_ref().map_or(spec_params.cost, |s| s.params().cost));
        let mut decoding = Decoding { model: &mut model, slot: 0, past: prompt.len(), tokens, left, times };
        decoding.run(spec.as_mut(), &crate::util::interrupt::requested, &mut draw)?;
    }
    if let Some(rest) = decoder.finish() {
        write!(out, "{rest}")?;
    }
    writeln!(out)?;
    let gen_s = gen_start.elapsed().as_secs_f64();
    if crate::util::interrupt::requested() {
        eprintln!("\ninterrupted: generation stopped after {generated} tokens");
    }
    if let Some(mut file) = logits_out {
        file.flush()?;
    }
    args.model.finish_trace(&model)?;
    eprintln!(
        "\nload: {load_s:.2} s | prompt: {} tokens, {:.1} t/s | generation: {generated} tokens, {:.1} t/s",
        prompt.len(),
        prompt.len() as f64 / prompt_s.max(1e-9),
        generated as f64 / gen_s.max(1e-9)
    );
    if let Some(spec) = &spec {
        let stats = spec.stats();
        // A drafted token's cost as the budget weighs it (a drafter that
        // computes: the measured seconds over a one-row step's).
        eprintln!(
            "speculation: {} drafted tokens in {} steps, {} accepted ({:.0}%); a drafted token costs {:.3} one-row steps",
            stats.drafted,
            stats.steps,
            stats.accepted,
            100.0 * stats.acceptance(),
            spec.per_draft()
        );
    }
    Ok(())
}
