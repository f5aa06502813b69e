//! The arguments several verbs share: where the model comes from and how it
//! is placed (`ModelArgs`, flattened into run, bench, perplexity and plan),
//! and the sampling flags of run and its chat.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::Result;
use baton_gen::{Sampler, SamplingParams};
use clap::Args;

use baton_load::SplitMode;

use super::choices::{split_mode, CacheType, GatePolicy, RankCollective};

/// Where the model comes from and how it is placed (shared by the verbs).
#[derive(Args, Clone, Debug)]
pub struct ModelArgs {
    /// GGUF model file, or a known model's name (`baton model list`), fetched
    /// into the cache on first use (default: smollm2-135m, SmolLM2-135M-Instruct Q4_1).
    #[arg(short = 'm', long = "model")]
    pub model: Option<PathBuf>,
    /// Devices to run on: `cpu`, or `cpu:0,cpu:1` (cores split evenly).
    #[arg(long, default_value = "cpu")]
    pub devices: String,
    /// Threads of a `cpu` device (default: all usable cores).
    #[arg(short = 't', long = "threads")]
    pub threads: Option<usize>,
    /// Context size (positions of the KV cache; default: the model's, at most 4096).
    #[arg(short = 'c', long = "ctx-size")]
    pub context: Option<usize>,
    /// Most tokens evaluated at once: the prompt's micro-batch (`-b`, `-ub`).
    #[arg(
        short = 'b',
        long = "batch-size",
        visible_alias = "ubatch-size",
        visible_short_alias = 'u',
        default_value_t = 512
    )]
    pub batch: usize,
    /// How the model is spread over several devices (`-sm`).
    #[arg(long = "split-mode", visible_alias = "sm", value_parser = split_mode(), default_value_t = SplitMode::Layer)]
    pub split_mode: SplitMode,
    /// Share of each device (`-ts`), e.g. `1,1` or `3,1`: of the layers
    /// (`layer`), of the heads, FFN rows and vocabulary (`tensor`).
    #[arg(long = "tensor-split", value_delimiter = ',')]
    pub tensor_split: Vec<f32>,
    /// Runs in flight at most (pipelined prompt micro-batches).
    #[arg(long = "n-copies", default_value_t = 2)]
    pub n_copies: usize,
    /// Wait for every split on the host before submitting the next (the
    /// old, synchronous behaviour, for comparison).
    #[arg(long = "sync-copies")]
    pub sync_copies: bool,
    /// Write a Chrome trace-event / Perfetto JSON file of every stream.
    #[arg(long = "trace")]
    pub trace: Option<PathBuf>,
    /// Print, per stream, the time spent in cross-device gates (waits on
    /// another device's point) against the time spent working.
    #[arg(long = "sync-profile")]
    pub sync_profile: bool,
    /// With `--split-mode tensor`: no partial sums (`attn_output` and
    /// `ffn_down` whole on every device, their inputs gathered), so the
    /// logits are bit for bit one device's; slower. With `--split-mode
    /// expert`: every expert's output gathered to the first device and
    /// summed there in one device's order (bit for bit one device's), not
    /// summed per device.
    #[arg(long = "tensor-exact", visible_alias = "split-exact")]
    pub tensor_exact: bool,
    /// Hybrid models (qwen35, qwen35moe): the delta rule over a prompt's
    /// tokens N at a time in its chunked (WY) form (e.g. 16). The logits
    /// then agree with the default (token by token) to float rounding, not
    /// bit for bit, and depend on how a prompt is split into steps; on
    /// AMD Zen 5 this form is not yet faster than the default (see
    /// docs/measurements.md). 0 (the default): token by token.
    #[arg(long = "delta-chunk", default_value_t = 0)]
    pub delta_chunk: usize,
    /// How the gates of `--split-mode tensor` wait (default:
    /// `BATON_WAIT_POLICY` or `BATON_FAST_SYNC` where set, else spin).
    #[arg(long = "gate-policy", value_enum)]
    pub gate_policy: Option<GatePolicy>,
    /// With `--split-mode tensor` over MPI ranks (`--devices cpu@0,cpu@1`
    /// under mpirun): how the all-reduce gates travel.
    #[arg(long = "rank-collective", value_enum, default_value_t = RankCollective::Mpi)]
    pub rank_collective: RankCollective,
    /// Keep the CPU's matmuls on the weights as the file stores them,
    /// instead of copies packed for the kernels on first use (which hold
    /// about as much memory again as the packed matrices).
    #[arg(long = "no-repack")]
    pub no_repack: bool,
    /// Copy the weights into device memory instead of reading the file's
    /// pages in place (the CPU maps them, and its packed matrices replace
    /// the mapped pages, so the weights are held once).
    #[arg(long = "no-mmap")]
    pub no_mmap: bool,
    /// In a step of several sequences, one attention op per sequence and
    /// layer (the form before ops in slots; for comparisons), instead of
    /// one op for every sequence.
    #[arg(long = "attention-per-sequence")]
    pub attention_per_sequence: bool,
    /// One slot of `-c` positions per sequence instead of the paged KV
    /// cache (blocks of 64 positions that sequences take as they fill them
    /// and share where a prefix was copied; the default where every layer
    /// is on the CPU in one process without a tensor split). For
    /// comparisons: the logits are the same bits either way.
    #[arg(long = "kv-slots")]
    pub kv_slots: bool,
    /// The paged KV cache's pool: bytes (`512MiB`, `4GiB`) or positions
    /// (`32768`), in whole blocks of 64 positions. Default: every
    /// sequence's whole context where 90% of the host memory available at
    /// load (less the model file, and the server's `--cache-ram`) holds it,
    /// else what it holds. The pool's memory becomes resident only as
    /// blocks are first used. A step that finds no free block is refused
    /// with a clear error by `baton run`; the server makes requests wait
    /// for blocks and preempts the newest running sequence instead.
    #[arg(long = "kv-pool", value_name = "SIZE", value_parser = super::choices::kv_pool, conflicts_with = "kv_pool_blocks")]
    pub kv_pool: Option<baton_model::KvPool>,
    /// The paged KV cache's pool in blocks of 64 positions (as `--kv-pool`).
    #[arg(long = "kv-pool-blocks", value_parser = clap::value_parser!(u32).range(1..))]
    pub kv_pool_blocks: Option<u32>,
    /// Bytes of host memory the pool's default budget leaves aside (set by
    /// the server to its `--cache-ram`).
    #[arg(skip)]
    pub kv_reserve: u64,
    /// KV cache type of keys and values (default: f16; f32 for perplexity).
    #[arg(long = "cache-type", value_enum, ignore_case = true)]
    pub cache_type: Option<CacheType>,
    /// KV cache type of the keys (`-ctk`; default: `--cache-type`'s).
    #[arg(long = "cache-type-k", value_enum, ignore_case = true)]
    pub cache_type_k: Option<CacheType>,
    /// KV cache type of the values (`-ctv`; default: `--cache-type`'s).
    #[arg(long = "cache-type-v", value_enum, ignore_case = true)]
    pub cache_type_v: Option<CacheType>,
    /// Every layer's experts (and router) on the CPU, the rest of each
    /// layer where `--devices` puts it (llama.cpp's `--cpu-moe`); a CPU
    /// that `--devices` does not list is added, holding no layer.
    #[arg(long = "cpu-moe")]
    pub cpu_moe: bool,
    /// The first N layers' experts on the CPU (`--n-cpu-moe`, `-ncmoe`).
    #[arg(long = "n-cpu-moe", value_name = "N")]
    pub n_cpu_moe: Option<usize>,
    /// `PATTERN=DEVICE`: the experts of the layers whose expert tensors'
    /// names (`blk.N.ffn_up_exps.weight`, …) the regular expression matches
    /// go on DEVICE (`CPU`, or a `--devices` entry), e.g. `exps=CPU`
    /// (llama.cpp's `-ot`, `--override-tensor`; several: repeat the flag or
    /// separate them with commas). Only experts are placed apart.
    #[arg(long = "override-tensor", value_delimiter = ',', value_name = "PATTERN=DEVICE")]
    pub override_tensor: Vec<String>,
}

impl ModelArgs {
    /// The model's path: the file `-m` names, or a known model's (the
    /// default one without `-m`), fetched first if it is not cached.
    pub fn path(&self) -> Result<PathBuf> {
        resolve_model(self.model.as_deref())
    }
}

/// The path of the model `-m` names (`None`: the default model), fetching a
/// known model first if it is not cached, with progress on stderr (quiet when
/// stderr is not a terminal).
pub fn resolve_model(model: Option<&Path>) -> Result<PathBuf> {
    let quiet = !std::io::stderr().is_terminal();
    Ok(baton_fetch::resolve_model(model, &mut |line| {
        if !quiet {
            eprintln!("{line}");
        }
    })?)
}

/// Sampling flags (llama.cpp's names).
#[derive(Args, Clone, Debug)]
pub struct SamplingArgs {
    /// Sampling temperature (0 = greedy).
    #[arg(long, default_value_t = 0.8)]
    temp: f32,
    /// Top-k filter (0 = off).
    #[arg(long = "top-k", default_value_t = 40)]
    top_k: usize,
    /// Top-p (nucleus) filter (1 = off).
    #[arg(long = "top-p", default_value_t = 0.95)]
    top_p: f32,
    /// Min-p filter (0 = off).
    #[arg(long = "min-p", default_value_t = 0.05)]
    min_p: f32,
    /// Repetition penalty (1 = off).
    #[arg(long = "repeat-penalty", default_value_t = 1.0)]
    repeat_penalty: f32,
    /// Tokens the repetition penalty looks back on (0 = off, -1 = the whole
    /// context; larger than the context is the context, as llama.cpp).
    #[arg(long = "repeat-last-n", default_value_t = 64, allow_negative_numbers = true)]
    repeat_last_n: i64,
    /// Subtracted from the logit of each token among the last
    /// `--repeat-last-n` (llama.cpp's `--presence-penalty`; 0 = off).
    #[arg(long = "presence-penalty", default_value_t = 0.0, allow_negative_numbers = true)]
    presence_penalty: f32,
    /// Subtracted once per occurrence among the last `--repeat-last-n`
    /// (llama.cpp's `--frequency-penalty`; 0 = off).
    #[arg(long = "frequency-penalty", default_value_t = 0.0, allow_negative_numbers = true)]
    frequency_penalty: f32,
    /// Random seed of sampling.
    #[arg(short = 's', long, default_value_t = baton_gen::DEFAULT_SEED)]
    seed: u64,
}

impl SamplingArgs {
    /// A sampler with these parameters (checked), for a model whose
    /// sequences hold `context` positions.
    pub fn sampler(&self, context: usize) -> Result<Sampler> {
        let repeat_last_n = match self.repeat_last_n {
            -1 => context,
            n => usize::try_from(n)
                .map_err(|_| anyhow::anyhow!("--repeat-last-n {n}: use 0 (off), -1 (the context) or a count"))?
                .min(context),
        };
        let params = SamplingParams {
            temperature: self.temp,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            repeat_last_n,
            presence_penalty: self.presence_penalty,
            frequency_penalty: self.frequency_penalty,
            seed: self.seed,
            logit_bias: Default::default(),
        };
        params.validate()?;
        Ok(Sampler::new(params))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_alone;
    use baton_core::DType;

    #[test]
    fn every_split_mode_spelling_parses() {
        for (name, mode) in [
            ("none", SplitMode::None),
            ("layer", SplitMode::Layer),
            ("tensor", SplitMode::Tensor),
            ("expert", SplitMode::Expert),
        ] {
            for flag in ["--split-mode", "--sm"] {
                let args = parse_alone::<ModelArgs>(&[flag, name]).unwrap_or_else(|e| panic!("{flag} {name}: {e}"));
                assert_eq!(args.split_mode, mode, "{flag} {name}");
            }
        }
        assert_eq!(parse_alone::<ModelArgs>(&[]).map(|a| a.split_mode).ok(), Some(SplitMode::Layer), "the default");
    }

    #[test]
    fn every_gate_policy_spelling_parses() {
        for (name, policy) in [("block", GatePolicy::Block), ("spin", GatePolicy::Spin), ("poll", GatePolicy::Poll)] {
            let args = parse_alone::<ModelArgs>(&["--gate-policy", name])
                .unwrap_or_else(|e| panic!("--gate-policy {name}: {e}"));
            assert_eq!(args.gate_policy, Some(policy), "--gate-policy {name}");
        }
        assert_eq!(
            parse_alone::<ModelArgs>(&[]).map(|a| a.gate_policy).ok(),
            Some(None),
            "none given: the environment decides"
        );
    }

    #[test]
    fn cache_types_parse_in_any_letter_case() {
        let names = [("f16", DType::F16), ("F16", DType::F16), ("f32", DType::F32), ("F32", DType::F32)];
        for (name, dtype) in
            names.into_iter().chain([("q8_0", DType::Q8_0), ("Q4_0", DType::Q4_0), ("bf16", DType::BF16)])
        {
            let args = parse_alone::<ModelArgs>(&["--cache-type", name])
                .unwrap_or_else(|e| panic!("--cache-type {name}: {e}"));
            assert_eq!(args.cache_type.map(CacheType::dtype), Some(dtype), "--cache-type {name}");
        }
    }

    #[test]
    fn a_bad_choice_is_clap_error_listing_the_choices() {
        for (args, choices) in [
            (["--split-mode", "row"], "[possible values: none, layer, tensor, expert]"),
            (["--gate-policy", "fast"], "[possible values: block, spin, poll]"),
            (["--cache-type", "q6_k"], "[possible values: f16, f32, bf16, q8_0, q4_0, q4_1, q5_0, q5_1]"),
        ] {
            let error = parse_alone::<ModelArgs>(&args).err().unwrap_or_else(|| panic!("{args:?} parsed"));
            assert_eq!(error.kind(), clap::error::ErrorKind::InvalidValue, "{args:?}");
            let text = error.to_string();
            assert!(text.contains(args[0]) && text.contains(choices), "{args:?}: {text}");
        }
    }
}
