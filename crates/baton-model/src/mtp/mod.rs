//! Qwen 3.5's multi-token-prediction (MTP) head: the block a Qwen 3.5 file
//! holds after the model's own (`nextn_predict_layers`, counted in
//! `block_count`), which guesses the token after next from the model's
//! last hidden state and the next token.
//!
//! For the row of position `p`, given the model's final hidden state `h`
//! at `p` (after the output norm, as vLLM's Qwen 3.5 MTP reads the
//! model's output) and the token `t` that follows position `p`:
//!
//! ```text
//! x = eh_proj([enorm(embed(t)) ; hnorm(h)])        (the embedding first)
//! x = x + attention(attn_norm(x))                  (a full-attention block
//! x = x + ffn(post_attention_norm(x))               at position p, with its
//!                                                   own keys and values)
//! logits = output(shared_head_norm(x))
//! ```
//!
//! The attention is the model's own kind (Qwen 3.5's: an output gate,
//! per-head Q/K norms, NeoX RoPE on the first `rope_dims` of each head);
//! the feed-forward block dense or experts as the model's; `embed` and
//! `output` are the model's, unless the file has the head's own
//! (`nextn.embed_tokens`, `nextn.shared_head_head`).
//!
//! The head runs on the CPU backend's kernels (baton-kernels), one row
//! at a time: each matrix is multiplied where it lies in the file's mapped
//! bytes by the same quantized matmul the CPU device's MatMul ops use
//! (the row's activations quantized once into Q8 blocks, integer tiles,
//! AVX-512, AVX2 or portable as the CPU has them), and the products of
//! 64 KiB of weights or more (the output's, a vocabulary by `dim`
//! matrix, above all) are split over the host threads of the device given
//! to [`MtpHead::compute_on`] (the CPU device's own pool). No matrix is
//! copied or dequantized: the head's memory beyond the file's pages is
//! its activation scratch, a row's logits and its keys and values (`2 ·
//! kv_heads · head_dim` f32 a position). The output matrix, where it is
//! the model's, is the loaded model's copy once shared
//! ([`MtpHead::share_output`]: a CPU's packed copy, whose file pages were
//! given back), so the file's pages of it are not made resident again. Sums are f32 as the kernels make
//! them, so the logits are within rounding of the float64 definition
//! (tests/reference/mtp_ref.py; the tests' bounds), and, the kernels'
//! products being the same bits for any thread count, the same bits with
//! or without threads.
//!
//! Its cost is mostly the output product: on qwen35moe-a3b-8l Q4_K_M (a
//! 248,320 × 2048 Q6_K output; Intel Xeon, AVX-512, 2 shared cores) a
//! chained row takes 31-42 ms, about one one-row step of those 8 layers
//! (the row-by-row f64 host form it replaced took 0.8-0.9 s); on the
//! qwen35 q8_0 toy 0.03 ms, 0.13 of a step (README, `--spec-type mtp`).
//! With the output product on the model's packed copy
//! ([`MtpHead::share_output`]) a row took 19 ms against 28 ms on the
//! file's bytes, at 2 layers of that shape (`examples/mtp-head-cost.rs`).

mod host;

use std::path::Path;
use std::sync::Arc;

use baton_core::backend::{Device, TensorRef};
use baton_kernels::ops;

use baton_gguf::GgufFile;

use crate::config::LlamaConfig;
use crate::error::ModelError;
use host::{rms_norm, rope_neox, sigmoid, swiglu, vector, Kernels, Matrix};

/// The head's feed-forward block: dense, or experts (and a shared one).
enum Ffn {
    /// Gate, up and down.
    Dense(Box<[Matrix; 3]>),
    Experts(Box<ExpertBlock>),
}

/// The head's experts: the router, each expert's matrices stacked, how
/// many run per token, and the shared expert where there is one.
struct ExpertBlock {
    router: Matrix,
    gate: Matrix,
    up: Matrix,
    down: Matrix,
    used: usize,
    shared: Option<SharedExpert>,
}

/// The expert every token runs, weighted by `sigmoid(gate_inp · x)`.
struct SharedExpert {
    gate_inp: Vec<f32>,
    gate: Matrix,
    up: Matrix,
    down: Matrix,
}

/// A file's multi-token-prediction head with its own keys and values (one
/// row per position it has run at). See the [module docs](self).
pub struct MtpHead {
    file: GgufFile,
    config: LlamaConfig,
    /// The head's block index in the file (the model's layer count).
    block: usize,
    embed: Matrix,
    output: Matrix,
    enorm: Vec<f32>,
    hnorm: Vec<f32>,
    eh_proj: Matrix,
    attn_norm: Vec<f32>,
    wq: Matrix,
    wk: Matrix,
    wv: Matrix,
    wo: Matrix,
    q_norm: Vec<f32>,
    k_norm: Vec<f32>,
    ffn_norm: Vec<f32>,
    ffn: Ffn,
    head_norm: Vec<f32>,
    /// Keys and values of positions `start..len`, `kv_heads · head_dim`
    /// each.
    keys: Vec<f32>,
    values: Vec<f32>,
    start: usize,
    len: usize,
    /// Its products' threads and scratch.
    kernels: Kernels,
    /// The model's own copy of the output matrix and its device, where
    /// the head multiplies by that ([`MtpHead::share_output`]).
    model_output: Option<(TensorRef, Arc<dyn Device>)>,
}

impl MtpHead {
    /// The head of the GGUF file at `path`, or `None` when the file has
    /// none (`nextn_predict_layers` absent or 0).
    ///
    /// # Errors
    /// The file's errors; [`ModelError::Config`] for a head this version
    /// does not compute (more than one prediction block, an architecture
    /// without Qwen 3.5's gated attention); a missing or misshapen tensor.
    pub fn open(path: impl AsRef<Path>) -> Result<Option<MtpHead>, ModelError> {
        MtpHead::from_file(GgufFile::open(path)?)
    }

    /// As [`open`](Self::open), from a parsed file.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub fn from_file(file: GgufFile) -> Result<Option<MtpHead>, ModelError> {
        let config = LlamaConfig::from_gguf(&file)?;
        let arch = config.arch.name();
        match config.prediction_layers {
            0 => return Ok(None),
            1 => {}
            n => return Err(ModelError::Config(format!("{n} prediction blocks (one is computed)"))),
        }
        let traits = config.arch.traits();
        if !traits.gated_attention || !traits.qk_norm {
            return Err(ModelError::Config(format!(
                "a multi-token-prediction head of {arch} (Qwen 3.5's is computed: gated attention with Q/K norms)"
            )));
        }
        let block = config.layers;
        let (dim, hd) = (config.dim, config.head_dim);
        let (q_width, kv_width) = (config.heads * hd, config.kv_heads * hd);
        let name = |suffix: &str| format!("blk.{block}.{suffix}.weight");
        let matrix = |n: &str, cols, rows| Matrix::find(&file, n, (cols, rows, 1));
        let own_or = |own: String, shared: &str| match file.tensor(&own) {
            Some(_) => own,
            None => shared.to_string(),
        };
        let embed = matrix(&own_or(name("nextn.embed_tokens"), "token_embd.weight"), dim, config.vocab)?;
        let trunk_output = if config.tied_output { "token_embd.weight" } else { "output.weight" };
        let output = matrix(&own_or(name("nextn.shared_head_head"), trunk_output), dim, config.vocab)?;
        let ffn = match config.experts {
            None => Ffn::Dense(Box::new([
                matrix(&name("ffn_gate"), dim, config.ffn_dim)?,
                matrix(&name("ffn_up"), dim, config.ffn_dim)?,
                matrix(&name("ffn_down"), config.ffn_dim, dim)?,
            ])),
            Some(e) => {
                let stack = |n: &str, cols, rows| Matrix::find(&file, n, (cols, rows, e.count));
                let shared = match e.shared {
                    Some(width) => Some(SharedExpert {
                        gate_inp: vector(&file, &name("ffn_gate_inp_shexp"), dim)?,
                        gate: matrix(&name("ffn_gate_shexp"), dim, width)?,
                        up: matrix(&name("ffn_up_shexp"), dim, width)?,
                        down: matrix(&name("ffn_down_shexp"), width, dim)?,
                    }),
                    None => None,
                };
                Ffn::Experts(Box::new(ExpertBlock {
                    router: matrix(&name("ffn_gate_inp"), dim, e.count)?,
                    gate: stack(&name("ffn_gate_exps"), dim, e.ffn_dim)?,
                    up: stack(&name("ffn_up_exps"), dim, e.ffn_dim)?,
                    down: stack(&name("ffn_down_exps"), e.ffn_dim, dim)?,
                    used: e.used,
                    shared,
                }))
            }
        };
        let head = MtpHead {
            embed,
            output,
            enorm: vector(&file, &name("nextn.enorm"), dim)?,
            hnorm: vector(&file, &name("nextn.hnorm"), dim)?,
            eh_proj: matrix(&name("nextn.eh_proj"), 2 * dim, dim)?,
            attn_norm: vector(&file, &name("attn_norm"), dim)?,
            wq: matrix(&name("attn_q"), dim, 2 * q_width)?,
            wk: matrix(&name("attn_k"), dim, kv_width)?,
            wv: matrix(&name("attn_v"), dim, kv_width)?,
            wo: matrix(&name("attn_output"), q_width, dim)?,
            q_norm: vector(&file, &name("attn_q_norm"), hd)?,
            k_norm: vector(&file, &name("attn_k_norm"), hd)?,
            ffn_norm: vector(&file, &name(traits.ffn_norm), dim)?,
            ffn,
            head_norm: vector(&file, &name("nextn.shared_head_norm"), dim)?,
            keys: Vec::new(),
            values: Vec::new(),
            start: 0,
            len: 0,
            kernels: Kernels::default(),
            model_output: None,
            block,
            config,
            file,
        };
        Ok(Some(head))
    }

    /// Splits the head's large products (the output's, the input
    /// projection's) over `device`'s host threads from now on, where it has
    /// them ([`Device::host_threads`]: a CPU device's pool, which they
    /// take in turn with the device's streams); without, or on a device
    /// with none, they run on the calling thread. The logits are the same
    /// bits either way (the kernels' products do not depend on the thread
    /// count).
    pub fn compute_on(&mut self, device: Arc<dyn Device>) {
        self.kernels.threads = Some(device);
    }

    /// Multiplies by the model's own copy of the output matrix from now
    /// on, `weights` on `device` ([`Model::output_weights`]), through the
    /// device ([`Device::host_matmul`]: a CPU multiplies its packed copy,
    /// the bits of the model's own output product), where the head's
    /// output is the model's: the file's bytes of that matrix, whose pages
    /// the CPU gave back once it packed them, are then never read again
    /// (at Qwen3.5-35B-A3B's sizes, 417 MB that would be resident twice).
    /// Returns whether it will: not where the file gives the head an
    /// output of its own (`nextn.shared_head_head`). Where the device does
    /// not offer it, each product reads the file as before.
    ///
    /// # Errors
    /// [`ModelError::Input`] where `weights` is not this head's output
    /// matrix (another shape or type: another file's model).
    ///
    /// [`Model::output_weights`]: crate::Model::output_weights
    pub fn share_output(&mut self, weights: TensorRef, device: Arc<dyn Device>) -> Result<bool, ModelError> {
        let trunk = if self.config.tied_output { "token_embd.weight" } else { "output.weight" };
        if self.output.name() != trunk {
            return Ok(false);
        }
        let expected = [self.config.vocab, self.config.dim];
        if weights.shape().dims() != expected || weights.dtype() != self.output.dtype() {
            return Err(ModelError::Input(format!(
                "an output matrix {:?} of {} for a head whose output is {expected:?} of {}",
                weights.shape(),
                weights.dtype(),
                self.output.dtype()
            )));
        }
        self.model_output = Some((weights, device));
        Ok(true)
    }

    /// The model's hyper-parameters, read from the same file.
    pub fn config(&self) -> &LlamaConfig {
        &self.config
    }

    /// The head's block index in the file (the model's layer count).
    pub fn block(&self) -> usize {
        self.block
    }

    /// The end of the positions whose keys and values the head holds
    /// (`start..len`): its next row is at `len` or before.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The first position the head holds (0 unless it was
    /// [restarted](Self::restart_at)).
    pub fn start(&self) -> usize {
        self.start
    }

    /// Whether the head holds no position.
    pub fn is_empty(&self) -> bool {
        self.len == self.start
    }

    /// Drops every row the head holds; its next row is at `position`, and
    /// the rows after it attend to the positions from there on only (a
    /// drafter that does not read a long text's earlier positions).
    pub fn restart_at(&mut self, position: usize) {
        self.keys.clear();
        self.values.clear();
        (self.start, self.len) = (position, position);
    }

    /// The head's logits (`vocab` values) for the row of `position`: the
    /// model's final hidden state `hidden` there (`dim` values, after the
    /// output norm) and `next`, the token that follows it. The head's own
    /// keys and values of later positions are dropped first (a rewind after
    /// rejected drafts), and those of `position` kept.
    ///
    /// # Errors
    /// [`ModelError::Input`] for a hidden state of another width, a token
    /// outside the vocabulary, or a position past [`len`](Self::len) (the
    /// rows before it must have run) or the context.
    pub fn forward(&mut self, hidden: &[f32], next: u32, position: usize) -> Result<Vec<f32>, ModelError> {
        self.forward_hidden(hidden, next, position).map(|(logits, _)| logits)
    }

    /// As [`forward`](Self::forward), with the head's own output hidden
    /// state besides the logits: `x` after the shared head norm (`dim`
    /// values), the input of the head's row at the next position when the
    /// model's own hidden state there is not known yet (a chain of drafts:
    /// vLLM's `Qwen3_5MultiTokenPredictor` returns this state, and
    /// llama.cpp's qwen35 MTP graph exposes it, to draft the next token).
    ///
    /// # Errors
    /// As [`forward`](Self::forward).
    pub fn forward_hidden(
        &mut self,
        hidden: &[f32],
        next: u32,
        position: usize,
    ) -> Result<(Vec<f32>, Vec<f32>), ModelError> {
        let mut x = self.input(hidden, next, position)?;
        let attended = self.attention(&rms_norm(&x, &self.attn_norm, self.config.rms_eps), position)?;
        x.iter_mut().zip(&attended).for_each(|(a, b)| *a += b);
        let fed = self.feed_forward(&rms_norm(&x, &self.ffn_norm, self.config.rms_eps))?;
        x.iter_mut().zip(&fed).for_each(|(a, b)| *a += b);
        let out = rms_norm(&x, &self.head_norm, self.config.rms_eps);
        Ok((self.logits(&out)?, out))
    }

    /// The output product of the normed row `x`: on the model's copy of
    /// the matrix where it is shared and its device computes it, else on
    /// the file's bytes.
    fn logits(&mut self, x: &[f32]) -> Result<Vec<f32>, ModelError> {
        if let Some((weights, device)) = &self.model_output {
            let mut logits = vec![0.0; self.config.vocab];
            if let Some(done) = device.host_matmul(weights, x, &mut logits) {
                done?;
                return Ok(logits);
            }
        }
        self.kernels.times(&self.output, &self.file, 0, x)
    }

    /// Stores the head's keys and values of the row of `position` (as
    /// [`forward`](Self::forward) would, the later positions dropped
    /// first) without computing its logits: a row whose draft is not
    /// wanted (the model's own token there is known), which later rows
    /// attend to. Costs the input projection and the keys and values only.
    ///
    /// # Errors
    /// As [`forward`](Self::forward).
    pub fn prime(&mut self, hidden: &[f32], next: u32, position: usize) -> Result<(), ModelError> {
        let x = self.input(hidden, next, position)?;
        self.store_keys(&rms_norm(&x, &self.attn_norm, self.config.rms_eps), position)
    }

    /// Drops the keys and values of positions `len..` (a rewind; a longer
    /// `len` changes nothing).
    pub fn truncate(&mut self, len: usize) {
        let kv_width = self.config.kv_heads * self.config.head_dim;
        self.len = self.len.min(len).max(self.start);
        self.keys.truncate((self.len - self.start) * kv_width);
        self.values.truncate((self.len - self.start) * kv_width);
    }

    /// The row's input, checked: `eh_proj([enorm(embed(next)) ; hnorm(hidden)])`.
    fn input(&mut self, hidden: &[f32], next: u32, position: usize) -> Result<Vec<f32>, ModelError> {
        let c = &self.config;
        if hidden.len() != c.dim {
            return Err(ModelError::Input(format!(
                "a hidden state of {} values for a model of {}",
                hidden.len(),
                c.dim
            )));
        }
        if next as usize >= c.vocab {
            return Err(ModelError::Input(format!("token {next} outside a vocabulary of {}", c.vocab)));
        }
        if position > self.len || position < self.start || position >= c.context {
            return Err(ModelError::Input(format!(
                "the head's row at position {position}: it holds positions {}..{} of a context of {}",
                self.start, self.len, c.context
            )));
        }
        let mut embedding = vec![0.0; c.dim];
        self.embed.row(&self.file, 0, next as usize, &mut embedding)?;
        let mut joined = rms_norm(&embedding, &self.enorm, c.rms_eps);
        joined.extend(rms_norm(hidden, &self.hnorm, c.rms_eps));
        self.kernels.times(&self.eh_proj, &self.file, 0, &joined)
    }

    /// The key (normed, rotated) and value of the normed row `x` stored at
    /// `position`, the later positions dropped.
    fn store_keys(&mut self, x: &[f32], position: usize) -> Result<(), ModelError> {
        let mut key = self.kernels.times(&self.wk, &self.file, 0, x)?;
        let value = self.kernels.times(&self.wv, &self.file, 0, x)?;
        let c = &self.config;
        for head in key.chunks_exact_mut(c.head_dim) {
            let normed = rms_norm(head, &self.k_norm, c.rms_eps);
            head.copy_from_slice(&normed);
            rope_neox(head, c.rope_dims, c.rope_base, position);
        }
        self.truncate(position);
        self.keys.extend_from_slice(&key);
        self.values.extend_from_slice(&value);
        self.len = position + 1;
        Ok(())
    }

    /// Gated attention of the normed row `x` at `position` over the head's
    /// keys and values of positions `start..=position` (this row's stored).
    fn attention(&mut self, x: &[f32], position: usize) -> Result<Vec<f32>, ModelError> {
        let both = self.kernels.times(&self.wq, &self.file, 0, x)?;
        self.store_keys(x, position)?;
        let c = &self.config;
        let (hd, heads, kv_heads) = (c.head_dim, c.heads, c.kv_heads);
        let kv_width = kv_heads * hd;
        let group = heads / kv_heads;
        let mut out = vec![0.0; heads * hd];
        for h in 0..heads {
            // Each head's query rows are followed by its gate's.
            let (query, gate) = both[2 * h * hd..2 * (h + 1) * hd].split_at(hd);
            let mut query = rms_norm(query, &self.q_norm, c.rms_eps);
            rope_neox(&mut query, c.rope_dims, c.rope_base, position);
            let kv = (h / group) * hd;
            let mut weights: Vec<f32> = (0..self.len - self.start)
                .map(|p| ops::dot_f32(&query, &self.keys[p * kv_width + kv..][..hd]) * c.attn_scale)
                .collect();
            ops::softmax_in_place(&mut weights);
            let o = &mut out[h * hd..(h + 1) * hd];
            for (p, &w) in weights.iter().enumerate() {
                for (o, &v) in o.iter_mut().zip(&self.values[p * kv_width + kv..][..hd]) {
                    *o += w * v;
                }
            }
            for (o, &g) in o.iter_mut().zip(gate) {
                *o *= sigmoid(g);
            }
        }
        self.kernels.times(&self.wo, &self.file, 0, &out)
    }

    /// The feed-forward block of the normed row `x`: dense, or the experts
    /// the router chooses (softmax, the `used` most probable, their
    /// probabilities renormalised; ties to the lower index) and the shared
    /// expert.
    fn feed_forward(&mut self, x: &[f32]) -> Result<Vec<f32>, ModelError> {
        let (file, k) = (&self.file, &mut self.kernels);
        let ExpertBlock { router, gate, up, down, used, shared } = match &self.ffn {
            Ffn::Dense(dense) => {
                let [gate, up, down] = &**dense;
                let act = swiglu(&k.times(gate, file, 0, x)?, &k.times(up, file, 0, x)?);
                return k.times(down, file, 0, &act);
            }
            Ffn::Experts(block) => &**block,
        };
        let mut probs = k.times(router, file, 0, x)?;
        ops::softmax_in_place(&mut probs);
        let mut order: Vec<usize> = (0..router.rows()).collect();
        order.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]).then(a.cmp(&b)));
        let chosen = &order[..(*used).min(order.len())];
        let total: f32 = chosen.iter().map(|&e| probs[e]).sum();
        let mut out = vec![0.0f32; x.len()];
        for &e in chosen {
            let weight = probs[e] / total;
            let act = swiglu(&k.times(gate, file, e, x)?, &k.times(up, file, e, x)?);
            for (o, d) in out.iter_mut().zip(k.times(down, file, e, &act)?) {
                *o += weight * d;
            }
        }
        if let Some(s) = shared {
            let act = swiglu(&k.times(&s.gate, file, 0, x)?, &k.times(&s.up, file, 0, x)?);
            let weight = sigmoid(ops::dot_f32(&s.gate_inp, x));
            for (o, d) in out.iter_mut().zip(k.times(&s.down, file, 0, &act)?) {
                *o += weight * d;
            }
        }
        Ok(out)
    }
}
