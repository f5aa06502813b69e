//! `baton run`: generate text, streaming tokens as they come.

use baton_llama::EncodeOptions;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Instant;

use std::sync::Arc;

use anyhow::{Context, Result};
use baton_composite::CompositeDevice;
use baton_llama::baton_tokenizer::TokenType;
use baton_llama::{LoadOptions, Model};
use baton_llama::{Sampler, SamplingParams};
use clap::Args;

/// Where the model comes from and how it is placed (shared by the verbs).
#[derive(Args, Clone, Debug)]
pub struct ModelArgs {
    /// GGUF model file (default: SmolLM2-135M-Instruct Q4_1, fetched on first use).
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
    /// How the model is spread over several devices (`-sm`): `none` (the
    /// first device only), `layer` (contiguous layers per device) or
    /// `tensor` (every weight split over the devices, all-reduce gates).
    #[arg(long = "split-mode", visible_alias = "sm", default_value = "layer")]
    pub split_mode: String,
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
    /// logits are bit for bit one device's; slower.
    #[arg(long = "tensor-exact")]
    pub tensor_exact: bool,
    /// How the gates of `--split-mode tensor` wait: block, spin or poll
    /// (default: `BATON_WAIT_POLICY` or `BATON_FAST_SYNC` where set, else
    /// spin: poll for 50 µs, then block, so a long wait frees the core).
    #[arg(long = "gate-policy")]
    pub gate_policy: Option<String>,
    /// KV cache type: f16 or f32 (default: f16; f32 for perplexity).
    #[arg(long = "cache-type")]
    pub cache_type: Option<String>,
}

impl ModelArgs {
    /// The model path, fetching the default model if none was given.
    pub fn path(&self) -> Result<PathBuf> {
        match &self.model {
            Some(p) => Ok(p.clone()),
            None => {
                let quiet = !std::io::stderr().is_terminal();
                Ok(baton_llama::default_model(&mut |line| {
                    if !quiet {
                        eprintln!("{line}");
                    }
                })?)
            }
        }
    }

    /// Loads the model on the first device of the list.
    pub fn load(&self) -> Result<Model> {
        let path = self.path()?;
        let devices = crate::devices::open(&self.devices, self.threads)?;
        let name = self.cache_type.as_deref().unwrap_or("f16");
        let cache_type = baton_core::DType::from_name(name)
            .filter(|t| matches!(t, baton_core::DType::F16 | baton_core::DType::F32))
            .with_context(|| format!("--cache-type {name:?}: use f16 or f32"))?;
        let options = LoadOptions {
            context: self.context,
            cache_type,
            batch: self.batch,
            tensor_split: self.tensor_split.clone(),
            n_copies: self.n_copies.max(1),
            sync_copies: self.sync_copies,
            tensor_exact: self.tensor_exact,
        };
        let devices = match self.split_mode.as_str() {
            "layer" | "tensor" => devices,
            "none" => devices.into_iter().take(1).collect(),
            other => anyhow::bail!("--split-mode {other:?}: use none, layer or tensor"),
        };
        if !self.tensor_split.is_empty() && self.tensor_split.len() != devices.len() {
            anyhow::bail!("--tensor-split has {} shares for {} devices", self.tensor_split.len(), devices.len());
        }
        if self.tensor_split.iter().any(|w| !w.is_finite() || *w < 0.0)
            || (!self.tensor_split.is_empty() && self.tensor_split.iter().all(|w| *w == 0.0))
        {
            anyhow::bail!("--tensor-split {:?}: shares are numbers of at least 0, not all 0", self.tensor_split);
        }
        let mut model = if self.split_mode == "tensor" {
            let policy = crate::devices::gate_policy(self.gate_policy.as_deref())?;
            let composite = CompositeDevice::new(devices, policy).context("building the composite device")?;
            Model::load_tensor_parallel(&path, Arc::new(composite), &options)
        } else {
            Model::load_split(&path, devices, &options)
        }
        .with_context(|| format!("loading {}", path.display()))?;
        if self.trace.is_some() || self.sync_profile {
            model.set_trace(Some(baton_sched::Trace::new()));
        }
        if let (true, Some((device, _))) = (self.sync_profile, model.tensor_parallel()) {
            device.gate_profile().enable(true);
        }
        Ok(model)
    }

    /// Writes the trace (if `--trace` was given) and prints each stream's
    /// busy share.
    pub fn finish_trace(&self, model: &Model) -> Result<()> {
        let Some(trace) = model.trace() else { return Ok(()) };
        if self.sync_profile {
            eprintln!("sync profile (waits on other devices' points against work, over the traced span):");
            for p in trace.gate_profile() {
                eprintln!(
                    "  {}: {} gates, waiting {:.2} ms ({:.1}% of the span, median {:.1} us), working {:.2} ms ({:.1}%)",
                    p.stream,
                    p.gates,
                    p.wait_us / 1e3,
                    100.0 * p.wait_us / p.span_us,
                    p.wait_p50_us,
                    p.work_us / 1e3,
                    100.0 * p.work_us / p.span_us
                );
            }
        }
        if let (true, Some((device, _))) = (self.sync_profile, model.tensor_parallel()) {
            let span = device.gate_profile().span().as_secs_f64();
            eprintln!("gates of --split-mode tensor, per inner device (reaching a gate to leaving it: waiting for the others, copies, adds), over {:.2} ms:", span * 1e3);
            for (inner, time) in device.inner().iter().zip(device.gate_profile().times()) {
                let total = time.total.as_secs_f64();
                eprintln!(
                    "  {}: {} gates, {:.2} ms ({:.1}% of the span, mean {:.1} us per gate)",
                    inner.info().name,
                    time.gates,
                    total * 1e3,
                    100.0 * total / span.max(1e-9),
                    total * 1e6 / time.gates.max(1) as f64
                );
            }
        }
        let Some(path) = &self.trace else { return Ok(()) };
        std::fs::write(path, trace.to_json()).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("trace written to {} (open in https://ui.perfetto.dev or chrome://tracing)", path.display());
        for (track, share) in trace.busy_shares() {
            eprintln!("  {track}: busy {:.0}% of the traced span", share * 100.0);
        }
        Ok(())
    }
}

/// Arguments of `baton run`.
#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub(crate) model: ModelArgs,
    /// The prompt (with --chat: one user message, answered once).
    #[arg(short = 'p', long = "prompt", required_unless_present = "chat")]
    pub(crate) prompt: Option<String>,
    /// Chat with an instruct model through its chat template (`-cnv`):
    /// user turns from stdin (EOF or /exit ends), or one answer to -p.
    #[arg(long = "chat", visible_alias = "conversation")]
    pub(crate) chat: bool,
    /// A system message opening the conversation (`-sys`, with --chat).
    #[arg(long = "system-prompt", requires = "chat")]
    pub(crate) system_prompt: Option<String>,
    /// Tokens to generate (default 128; with --chat, per answer, default
    /// 512). Stops early at end-of-generation tokens (with --chat, at the
    /// end of the turn).
    #[arg(short = 'n', long = "n-predict")]
    pub(crate) n_predict: Option<usize>,
    #[command(flatten)]
    pub(crate) sampling: SamplingArgs,
    /// Also print special tokens.
    #[arg(long)]
    pub(crate) special: bool,
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
    /// Tokens the repetition penalty looks back on.
    #[arg(long = "repeat-last-n", default_value_t = 64)]
    repeat_last_n: usize,
    /// Random seed of sampling.
    #[arg(short = 's', long, default_value_t = baton_llama::DEFAULT_SEED)]
    seed: u64,
}

impl SamplingArgs {
    /// A sampler with these parameters (checked).
    pub fn sampler(&self) -> Result<Sampler> {
        let params = SamplingParams {
            temperature: self.temp,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            repeat_last_n: self.repeat_last_n,
            seed: self.seed,
        };
        params.validate()?;
        Ok(Sampler::new(params))
    }
}

/// Tokens `baton run` generates when `-n` is not given.
const DEFAULT_N_PREDICT: usize = 128;

/// Runs `baton run`.
pub fn run(args: RunArgs) -> Result<()> {
    if args.chat {
        return crate::chat::run(args);
    }
    let text = args.prompt.as_deref().context("-p is required (or --chat)")?;
    let load_start = Instant::now();
    let mut model = args.model.load()?;
    let load_s = load_start.elapsed().as_secs_f64();
    let mut sampler = args.sampling.sampler()?;
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
    let prompt_start = Instant::now();
    let mut token = sampler.sample(model.eval_prompt(&prompt, 0)?)?;
    let prompt_s = prompt_start.elapsed().as_secs_f64();
    let gen_start = Instant::now();
    let mut generated = 0usize;
    let eos = model.tokenizer().eos_id();
    let tokenizer = model.shared_tokenizer();
    let mut decoder = tokenizer.stream_decoder(args.special);
    let mut past = prompt.len();
    while generated < n_predict && !crate::interrupt::requested() {
        if Some(token) == eos || tokenizer.token_type(token).is_ok_and(|t| t == TokenType::Control) {
            break;
        }
        sampler.accept(token);
        generated += 1;
        if let Some(text) = decoder.push(token)? {
            write!(out, "{text}")?;
            out.flush()?;
        }
        if generated == n_predict {
            break;
        }
        let logits = model.eval(&[token], past, baton_llama::Logits::Last)?;
        past += 1;
        token = sampler.sample(logits)?;
    }
    if let Some(rest) = decoder.finish() {
        write!(out, "{rest}")?;
    }
    writeln!(out)?;
    let gen_s = gen_start.elapsed().as_secs_f64();
    if crate::interrupt::requested() {
        eprintln!("\ninterrupted: generation stopped after {generated} tokens");
    }
    args.model.finish_trace(&model)?;
    eprintln!(
        "\nload: {load_s:.2} s | prompt: {} tokens, {:.1} t/s | generation: {generated} tokens, {:.1} t/s",
        prompt.len(),
        prompt.len() as f64 / prompt_s.max(1e-9),
        generated as f64 / gen_s.max(1e-9)
    );
    Ok(())
}
