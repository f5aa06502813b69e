//! `baton perplexity`: llama.cpp's perplexity method.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use baton_gen::{perplexity, PerplexityOptions};
use clap::Args;

use crate::cli::args::ModelArgs;
use crate::cli::choices::CacheType;

/// Arguments of `baton perplexity`.
#[derive(Args)]
pub struct PerplexityArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Text file to score.
    #[arg(short = 'f', long = "file")]
    file: PathBuf,
    /// Chunks to score (default: every whole chunk).
    #[arg(long)]
    chunks: Option<usize>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `baton perplexity`.
pub fn run(mut args: PerplexityArgs) -> Result<()> {
    let text = std::fs::read_to_string(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    let ctx = args.model.context.unwrap_or(512);
    if ctx < 4 {
        bail!("-c must be at least 4");
    }
    args.model.context = Some(ctx);
    // An f32 cache keeps the score within 0.5% of the float64 reference;
    // f16 moved it 0.5-0.8% on SmolLM2 (see the reference tests).
    args.model.cache_type.get_or_insert(CacheType::F32);
    args.model.batch = args.model.batch.max(ctx);
    let mut model = args.model.load()?;
    let start = Instant::now();
    let json = args.json;
    let result = perplexity(
        &mut model,
        &text,
        &PerplexityOptions { context: ctx, chunks: args.chunks },
        &mut |chunk, running| {
            if !json {
                eprintln!("[{chunk}] {running:.4}");
            }
        },
    )?;
    let seconds = start.elapsed().as_secs_f64();
    if json {
        println!(
            "{{\"ppl\":{},\"nll_mean\":{},\"chunks\":{},\"ctx\":{},\"tokens_scored\":{},\"seconds\":{seconds:.3}}}",
            result.ppl, result.nll_mean, result.chunks, ctx, result.tokens_scored
        );
    } else {
        println!(
            "perplexity: {:.4} over {} chunks of {ctx} ({} tokens scored, {seconds:.1} s)",
            result.ppl, result.chunks, result.tokens_scored
        );
    }
    Ok(())
}
