//! `baton model`: synthesize, fetch and inspect model files.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use baton_core::DType;
use baton_llama::{write_synth_model, SynthShape, SynthSpec};
use clap::Subcommand;

/// `baton model` verbs.
#[derive(Subcommand)]
pub enum ModelCommand {
    /// Write a random-weight llama GGUF with a valid tokenizer.
    ///
    /// Example: baton model synth --shape tiny --type q4_1 -o tiny-q4_1.gguf
    ///          baton model synth --shape stories110M --type q4_k -o s110-q4_k.gguf
    Synth {
        /// tiny, tiny256, stories15M, stories110M or smol135M.
        #[arg(long, default_value = "tiny")]
        shape: String,
        /// f32, f16, q8_0, q4_0, q4_1, q4_k, q5_k or q6_k. K-quant matrices
        /// whose rows are not multiples of 256 are stored as q8_0 (use the
        /// tiny256 or stories110M shape to avoid that).
        #[arg(long = "type", default_value = "f32")]
        dtype: String,
        /// Seed of the weights.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Output file.
        #[arg(short = 'o', long)]
        output: PathBuf,
    },
    /// Fetch the default model (SmolLM2-135M-Instruct Q4_1) into the cache and print its path.
    Fetch,
    /// Print a model's hyper-parameters and tensor types.
    Info {
        /// GGUF file (default: the default model).
        #[arg(short = 'm', long)]
        model: Option<PathBuf>,
    },
}

/// Runs `baton model ...`.
pub fn run(cmd: ModelCommand) -> Result<()> {
    match cmd {
        ModelCommand::Synth { shape, dtype, seed, output } => {
            let shape = SynthShape::from_name(&shape).with_context(|| {
                format!("unknown shape {shape:?}: use {}", names(SynthShape::ALL.map(|s| s.name())))
            })?;
            let dtype =
                DType::from_name(&dtype).filter(|t| SynthSpec::SUPPORTED_DTYPES.contains(t)).with_context(|| {
                    format!("unknown type {dtype:?}: use {}", names(SynthSpec::SUPPORTED_DTYPES.map(|t| t.name())))
                })?;
            let summary = write_synth_model(&SynthSpec { shape, dtype, seed }, &output)?;
            println!(
                "wrote {} ({} parameters, {:.1} MiB)",
                summary.path.display(),
                summary.n_params,
                summary.bytes as f64 / (1 << 20) as f64
            );
            if !summary.fallbacks.is_empty() {
                println!(
                    "{} of the matrices stored in another type: their rows are not whole {dtype} blocks ({} values)",
                    summary.fallbacks.len(),
                    dtype.block_elems()
                );
            }
            for (name, t) in summary.fallbacks {
                println!("  {name} stored as {t}");
            }
        }
        ModelCommand::Fetch => {
            let path = baton_llama::default_model(&mut |line| eprintln!("{line}"))?;
            println!("{}", path.display());
        }
        ModelCommand::Info { model } => {
            let path = match model {
                Some(p) => p,
                None => baton_llama::default_model(&mut |line| eprintln!("{line}"))?,
            };
            let file = baton_gguf_open(&path)?;
            let config = baton_llama::LlamaConfig::from_gguf(&file)?;
            println!("{config:#?}");
            println!("parameters: {}", config.n_params());
        }
    }
    Ok(())
}

/// `a, b or c`.
fn names<const N: usize>(names: [&str; N]) -> String {
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

fn baton_gguf_open(path: &std::path::Path) -> Result<baton_llama::baton_gguf::GgufFile> {
    if !path.exists() {
        bail!("{} does not exist", path.display());
    }
    Ok(baton_llama::baton_gguf::GgufFile::open(path)?)
}
