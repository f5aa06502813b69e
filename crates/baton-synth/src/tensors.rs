//! The tensors of a synthetic llama-family model and the sources that generate
//! their bytes row by row while the file is written.

use std::io::{self, Read};

use baton_core::DType;
use baton_kernels::quantize_row;

use super::rng::SplitMix64;
use super::shape::{ShapeParams, SynthGemma4, SynthRecurrent};

/// How a tensor's values are drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Init {
    /// Normal-ish noise with this standard deviation (weight matrices).
    Noise {
        /// The standard deviation.
        std: f32,
    },
    /// `1 + 0.1 · noise`: RMS-norm weights near one.
    NearOne,
    /// `v · (1 + 0.1 · noise)`: scales near `v`.
    Near(f32),
    /// `-exp(0.5 · noise)`: a recurrent layer's `ssm_a` (`-exp(A_log)`).
    Decay,
    /// Gemma 4's `rope_freqs`: 1 for the first `rotated` values (pairs
    /// that rotate), 1e30 for the rest (pairs that do not).
    RopeFactors {
        /// Pairs that rotate.
        rotated: usize,
    },
}

/// One tensor of the file: name, ggml-order dims, storage type and values.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TensorPlan {
    pub(crate) name: String,
    /// ggml order: `dims[0]` is the innermost (row) length.
    pub(crate) dims: Vec<u64>,
    pub(crate) dtype: DType,
    pub(crate) init: Init,
    /// Whether `dtype` differs from the requested one because the rows are
    /// not whole blocks of it.
    pub(crate) fell_back: bool,
}

impl TensorPlan {
    /// A weight matrix `[cols, rows]` (ggml order), stored in `requested`
    /// when its rows are whole blocks of it, else in its fallback (see
    /// [`fallback`]). The noise has standard
    /// deviation `1/sqrt(cols)`: a row dotted with an RMS-normalised input
    /// (entries of size ~1) then yields values of size ~1, so attention
    /// scores, FFN activations and logits all stay of order one.
    fn matrix(name: String, cols: usize, rows: usize, requested: DType) -> Self {
        let fits = cols.is_multiple_of(requested.block_elems());
        Self {
            name,
            dims: vec![cols as u64, rows as u64],
            dtype: if fits { requested } else { fallback(requested, cols) },
            init: Init::Noise { std: 1.0 / (cols as f32).sqrt() },
            fell_back: !fits,
        }
    }

    /// `count` experts' matrices `[cols, rows]` stacked along a third
    /// dimension (ggml order `[cols, rows, count]`), typed as a matrix.
    fn experts(name: String, cols: usize, rows: usize, count: usize, requested: DType) -> Self {
        let mut plan = Self::matrix(name, cols, rows, requested);
        plan.dims.push(count as u64);
        plan
    }

    /// An RMS-norm weight of `len` values, always F32 (as llama.cpp stores
    /// norms whatever the file type).
    fn norm(name: String, len: usize) -> Self {
        Self { name, dims: vec![len as u64], dtype: DType::F32, init: Init::NearOne, fell_back: false }
    }

    /// A bias of `len` values, F32, noise of standard deviation 0.1.
    fn bias(name: String, len: usize) -> Self {
        Self::vector(name, len, 0.1)
    }

    /// `len` values, F32, noise of standard deviation `std`.
    fn vector(name: String, len: usize, std: f32) -> Self {
        Self { name, dims: vec![len as u64], dtype: DType::F32, init: Init::Noise { std }, fell_back: false }
    }

    /// A bias per expert: `count` rows of `len` values (ggml order `[len,
    /// count]`), F32.
    fn expert_bias(name: String, len: usize, count: usize) -> Self {
        Self { dims: vec![len as u64, count as u64], ..Self::bias(name, len) }
    }

    /// The number of values.
    pub(crate) fn elements(&self) -> u64 {
        self.dims.iter().product()
    }

    /// The generator of this tensor's bytes for a model seed.
    pub(crate) fn source(&self, seed: u64) -> RowSource {
        let row_elems = self.dims.first().copied().unwrap_or(1) as usize;
        let rows = self.dims.iter().skip(1).product::<u64>() as usize;
        // Plans only hold dtypes whose rows are whole blocks (see `matrix`),
        // so this is `Some`; an empty row makes `read` fail rather than panic.
        let row_bytes = self.dtype.row_bytes(row_elems).unwrap_or(0);
        RowSource {
            rng: SplitMix64::for_tensor(seed, &self.name),
            init: self.init,
            dtype: self.dtype,
            row_elems,
            row_bytes,
            rows_left: rows,
            encoded: Vec::new(),
            position: 0,
        }
    }
}

/// The type a matrix with rows of `cols` values is stored in when they are
/// not whole blocks of `requested`: Q8_0 for a K-quant when the rows are
/// whole blocks of 32 (the reference engine also keeps such matrices in an
/// 8-bit or 5-bit 32-value format), F16 otherwise (as llama.cpp's quantizer).
fn fallback(requested: DType, cols: usize) -> DType {
    if requested.is_k_quant() && cols.is_multiple_of(DType::Q8_0.block_elems()) {
        DType::Q8_0
    } else {
        DType::F16
    }
}

/// How a file's matrices are typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SynthMix {
    /// Every matrix in the requested type (or its fallback).
    #[default]
    Uniform,
    /// llama.cpp's Q4_K_M: Q4_K, with Q6_K for the output projection (the
    /// token embedding when tied), and for `attn_v` and `ffn_down` in the
    /// first and last eighth of the layers and every third layer between.
    Q4KM,
    /// llama.cpp's MXFP4_MOE, as gpt-oss's files come: the experts in
    /// MXFP4, every other matrix Q8_0 (the router f32).
    Mxfp4Moe,
}

/// Whether llama.cpp's `_M` mixes give layer `layer` of `layers` more bits.
fn more_bits(layer: usize, layers: usize) -> bool {
    layer < layers / 8 || layer >= 7 * layers / 8 || (layer - layers / 8) % 3 == 2
}

/// Retypes `plan` (written in Q4_K) as `mix` says.
pub(crate) fn apply_mix(plan: &mut [TensorPlan], mix: SynthMix, params: &ShapeParams) {
    if mix == SynthMix::Uniform {
        return;
    }
    if mix == SynthMix::Mxfp4Moe {
        for tensor in plan.iter_mut().filter(|t| t.name.ends_with("_exps.weight") && t.dtype == DType::Q8_0) {
            tensor.dtype = DType::MXFP4;
        }
        return;
    }
    let output = if params.tied_embeddings { "token_embd.weight" } else { "output.weight" };
    for tensor in plan.iter_mut().filter(|t| t.dims.len() >= 2 && t.dtype == DType::Q4_K) {
        let layer =
            tensor.name.strip_prefix("blk.").and_then(|rest| rest.split('.').next()).and_then(|l| l.parse().ok());
        let wide = match layer {
            Some(layer) => {
                (tensor.name.contains(".attn_v.") || tensor.name.contains(".ffn_down"))
                    && more_bits(layer, params.n_layers)
            }
            None => tensor.name == output,
        };
        let cols = tensor.dims[0] as usize;
        if wide && cols.is_multiple_of(DType::Q6_K.block_elems()) {
            tensor.dtype = DType::Q6_K;
        }
    }
}

/// Every tensor of a model of this shape, in llama.cpp's file order:
/// `token_embd`, the blocks, `output_norm`, then `output` unless tied.
pub(crate) fn plan(params: &ShapeParams, requested: DType) -> Vec<TensorPlan> {
    let dim = params.dim;
    let traits = params.arch.traits();
    let mut tensors = vec![TensorPlan::matrix("token_embd.weight".into(), dim, params.vocab, requested)];
    if let Some(g) = params.gemma4 {
        gemma4_plan(&mut tensors, params, g, requested);
    }
    for layer in (0..params.n_layers).filter(|_| params.gemma4.is_none()) {
        let name = |suffix: &str| format!("blk.{layer}.{suffix}.weight");
        tensors.push(TensorPlan::norm(name("attn_norm"), dim));
        match params.recurrent.filter(|r| r.is_recurrent(layer)) {
            Some(r) => tensors.extend(recurrent_layer(layer, r, dim, requested)),
            None => attention_layer(&mut tensors, params, layer, requested),
        }
        tensors.push(TensorPlan::norm(name(traits.ffn_norm), dim));
        feed_forward(&mut tensors, params, layer, requested);
        if traits.post_norms {
            tensors.push(TensorPlan::norm(name("post_ffw_norm"), dim));
        }
    }
    for layer in params.n_layers..params.n_layers + params.mtp_layers {
        mtp_layer(&mut tensors, params, layer, requested);
    }
    tensors.push(TensorPlan::norm("output_norm.weight".into(), dim));
    if !params.tied_embeddings {
        tensors.push(TensorPlan::matrix("output.weight".into(), dim, params.vocab, requested));
    }
    tensors
}

/// A multi-token-prediction block's tensors (block `layer`, after the
/// model's own), as Qwen 3.5's files name them: an attending block, then
/// the projection of `[enorm(embedding); hnorm(hidden)]` (`nextn.eh_proj`,
/// `2·dim` to `dim`), its two norms and the norm before the shared output
/// (`nextn.shared_head_norm`). The block shares the model's embedding and
/// output, so neither `nextn.embed_tokens` nor `nextn.shared_head_head` is
/// written.
fn mtp_layer(tensors: &mut Vec<TensorPlan>, params: &ShapeParams, layer: usize, requested: DType) {
    let dim = params.dim;
    let name = |suffix: &str| format!("blk.{layer}.{suffix}.weight");
    tensors.push(TensorPlan::norm(name("attn_norm"), dim));
    attention_layer(tensors, params, layer, requested);
    tensors.push(TensorPlan::norm(name(params.arch.traits().ffn_norm), dim));
    feed_forward(tensors, params, layer, requested);
    tensors.extend([
        TensorPlan::matrix(name("nextn.eh_proj"), 2 * dim, dim, requested),
        TensorPlan::norm(name("nextn.enorm"), dim),
        TensorPlan::norm(name("nextn.hnorm"), dim),
        TensorPlan::norm(name("nextn.shared_head_norm"), dim),
    ]);
}

/// Gemma 4's tensors (`docs/hybrid-facts.md` §4): sliding and full layers
/// with their own head sizes, full layers without `attn_v`, layers that
/// share keys and values without `attn_k`, per-layer embeddings, the
/// proportional RoPE's `rope_freqs`, and experts beside a dense block.
///
/// Adds every Gemma 4 tensor after `token_embd` (the model's own, then each
/// layer's) to `tensors`.
fn gemma4_plan(tensors: &mut Vec<TensorPlan>, params: &ShapeParams, g: SynthGemma4, requested: DType) {
    let (dim, layers) = (params.dim, params.n_layers);
    let full_head = params.head_dim();
    if g.per_layer > 0 {
        let all = g.per_layer * layers;
        tensors.push(TensorPlan::matrix("per_layer_token_embd.weight".into(), all, params.vocab, requested));
        tensors.push(TensorPlan::matrix("per_layer_model_proj.weight".into(), dim, all, requested));
        tensors.push(TensorPlan::norm("per_layer_proj_norm.weight".into(), g.per_layer));
    }
    let factors = TensorPlan::vector("rope_freqs.weight".into(), full_head / 2, 1.0);
    tensors.push(TensorPlan { init: Init::RopeFactors { rotated: g.full_rotated_pairs }, ..factors });
    let kv_layers = layers - g.shared_kv_layers;
    for l in 0..layers {
        let name = |suffix: &str| format!("blk.{l}.{suffix}.weight");
        let (hd, kv_heads) = if g.is_sliding(l) { g.swa_heads } else { (full_head, g.full_kv_heads) };
        let (q, kv) = (params.n_heads * hd, kv_heads * hd);
        tensors.push(TensorPlan::norm(name("attn_norm"), dim));
        tensors.push(TensorPlan::matrix(name("attn_q"), dim, q, requested));
        if l < kv_layers {
            tensors.push(TensorPlan::matrix(name("attn_k"), dim, kv, requested));
            // Full layers' values are their keys' projection (no attn_v).
            if g.is_sliding(l) {
                tensors.push(TensorPlan::matrix(name("attn_v"), dim, kv, requested));
            }
            tensors.push(head_norm(name("attn_k_norm"), hd));
        }
        tensors.push(head_norm(name("attn_q_norm"), hd));
        tensors.push(TensorPlan::matrix(name("attn_output"), q, dim, requested));
        tensors.push(TensorPlan::norm(name("post_attention_norm"), dim));
        tensors.push(TensorPlan::norm(name("layer_output_scale"), 1));
        let ffn = g.ffn_width(l, params.n_layers, params.ffn);
        tensors.push(TensorPlan::norm(name("ffn_norm"), dim));
        tensors.push(TensorPlan::matrix(name("ffn_gate"), dim, ffn, requested));
        tensors.push(TensorPlan::matrix(name("ffn_up"), dim, ffn, requested));
        tensors.push(TensorPlan::matrix(name("ffn_down"), ffn, dim, requested));
        tensors.push(TensorPlan::norm(name("post_ffw_norm"), dim));
        if let Some(e) = params.experts {
            // The router stays f32, as llama.cpp's quantizer leaves it.
            tensors.push(TensorPlan::matrix(name("ffn_gate_inp"), dim, e.count, DType::F32));
            // The router sees `rmsnorm(x) / √dim` times this scale: near
            // √dim, its logits are of order one (as other toys' routers').
            let scale = TensorPlan::norm(format!("blk.{l}.ffn_gate_inp.scale"), dim);
            tensors.push(TensorPlan { init: Init::Near((dim as f32).sqrt()), ..scale });
            for norm in ["pre_ffw_norm_2", "post_ffw_norm_1", "post_ffw_norm_2"] {
                tensors.push(TensorPlan::norm(name(norm), dim));
            }
            tensors.push(TensorPlan::experts(name("ffn_gate_up_exps"), dim, 2 * e.ffn_dim, e.count, requested));
            tensors.push(TensorPlan::experts(name("ffn_down_exps"), e.ffn_dim, dim, e.count, requested));
            tensors.push(TensorPlan::norm(format!("blk.{l}.ffn_down_exps.scale"), e.count));
        }
        if g.per_layer > 0 {
            tensors.push(TensorPlan::matrix(name("inp_gate"), dim, g.per_layer, requested));
            tensors.push(TensorPlan::matrix(name("proj"), g.per_layer, dim, requested));
            tensors.push(TensorPlan::norm(name("post_norm"), dim));
        }
    }
}

/// A Gemma 4 query or key norm of a head of `hd`: weights near `hd^-1/4`,
/// so that the unscaled scores of RMS-normed queries and keys are of order
/// one (as `1/√hd` makes them elsewhere; random unit weights would make
/// every softmax nearly one-hot).
fn head_norm(name: String, hd: usize) -> TensorPlan {
    TensorPlan { init: Init::Near((hd as f32).powf(-0.25)), ..TensorPlan::norm(name, hd) }
}

/// A recurrent (Gated DeltaNet) layer's tensors, as Qwen 3.5's files hold
/// them; the convolution, decay and norm stay f32 (llama.cpp does not
/// quantize them).
fn recurrent_layer(layer: usize, r: SynthRecurrent, dim: usize, requested: DType) -> Vec<TensorPlan> {
    let name = |suffix: &str| format!("blk.{layer}.{suffix}");
    let (key_dim, value_dim) = (r.key_heads * r.head_dim, r.value_heads * r.head_dim);
    let conv_dim = 2 * key_dim + value_dim;
    let conv = TensorPlan::matrix(name("ssm_conv1d.weight"), r.conv_kernel, conv_dim, DType::F32);
    let decay = TensorPlan { init: Init::Decay, ..TensorPlan::vector(name("ssm_a"), r.value_heads, 1.0) };
    vec![
        TensorPlan::matrix(name("attn_qkv.weight"), dim, conv_dim, requested),
        TensorPlan::matrix(name("attn_gate.weight"), dim, value_dim, requested),
        conv,
        TensorPlan::bias(name("ssm_dt.bias"), r.value_heads),
        decay,
        TensorPlan::matrix(name("ssm_beta.weight"), dim, r.value_heads, requested),
        TensorPlan::matrix(name("ssm_alpha.weight"), dim, r.value_heads, requested),
        TensorPlan::norm(name("ssm_norm.weight"), r.head_dim),
        TensorPlan::matrix(name("ssm_out.weight"), value_dim, dim, requested),
    ]
}

/// An attention layer's tensors (a query twice as wide where it carries an
/// output gate).
fn attention_layer(tensors: &mut Vec<TensorPlan>, params: &ShapeParams, layer: usize, requested: DType) {
    let dim = params.dim;
    let q_width = params.n_heads * params.head_dim();
    let kv_width = params.n_kv_heads * params.head_dim();
    let traits = params.arch.traits();
    let name = |suffix: &str| format!("blk.{layer}.{suffix}.weight");
    let bias = |suffix: &str| format!("blk.{layer}.{suffix}.bias");
    let q_rows = if traits.gated_attention { 2 * q_width } else { q_width };
    tensors.extend([
        TensorPlan::matrix(name("attn_q"), dim, q_rows, requested),
        TensorPlan::matrix(name("attn_k"), dim, kv_width, requested),
        TensorPlan::matrix(name("attn_v"), dim, kv_width, requested),
    ]);
    if traits.qkv_bias {
        tensors.extend([
            TensorPlan::bias(bias("attn_q"), q_width),
            TensorPlan::bias(bias("attn_k"), kv_width),
            TensorPlan::bias(bias("attn_v"), kv_width),
        ]);
    }
    if traits.qk_norm {
        tensors.extend([
            TensorPlan::norm(name("attn_q_norm"), params.head_dim()),
            TensorPlan::norm(name("attn_k_norm"), params.head_dim()),
        ]);
    }
    tensors.push(TensorPlan::matrix(name("attn_output"), q_width, dim, requested));
    if traits.attn_output_bias {
        tensors.push(TensorPlan::bias(bias("attn_output"), dim));
    }
    if traits.attn_sinks {
        // Sink logits of the size of the scores (about one).
        tensors.push(TensorPlan::vector(name("attn_sinks"), params.n_heads, 1.0));
    }
    if traits.post_norms {
        tensors.push(TensorPlan::norm(name("post_attention_norm"), dim));
    }
}

/// A feed-forward block's tensors: dense, or experts (and a shared one).
fn feed_forward(tensors: &mut Vec<TensorPlan>, params: &ShapeParams, layer: usize, requested: DType) {
    let (dim, ffn) = (params.dim, params.ffn);
    let traits = params.arch.traits();
    let name = |suffix: &str| format!("blk.{layer}.{suffix}.weight");
    let bias = |suffix: &str| format!("blk.{layer}.{suffix}.bias");
    match params.experts {
        Some(e) => {
            tensors.extend([
                // The router stays f32 in every file type (llama.cpp's
                // quantizer never quantizes it).
                TensorPlan::matrix(name("ffn_gate_inp"), dim, e.count, DType::F32),
                TensorPlan::experts(name("ffn_gate_exps"), dim, e.ffn_dim, e.count, requested),
                TensorPlan::experts(name("ffn_up_exps"), dim, e.ffn_dim, e.count, requested),
                TensorPlan::experts(name("ffn_down_exps"), e.ffn_dim, dim, e.count, requested),
            ]);
            if traits.expert_biases {
                tensors.extend([
                    TensorPlan::bias(bias("ffn_gate_inp"), e.count),
                    TensorPlan::expert_bias(bias("ffn_gate_exps"), e.ffn_dim, e.count),
                    TensorPlan::expert_bias(bias("ffn_up_exps"), e.ffn_dim, e.count),
                    TensorPlan::expert_bias(bias("ffn_down_exps"), dim, e.count),
                ]);
            }
        }
        None => tensors.extend([
            TensorPlan::matrix(name("ffn_gate"), dim, ffn, requested),
            TensorPlan::matrix(name("ffn_up"), dim, ffn, requested),
            TensorPlan::matrix(name("ffn_down"), ffn, dim, requested),
        ]),
    }
    if let Some(shared) = params.experts.and_then(|e| e.shared) {
        tensors.extend([
            TensorPlan::vector(name("ffn_gate_inp_shexp"), dim, 1.0 / (dim as f32).sqrt()),
            TensorPlan::matrix(name("ffn_gate_shexp"), dim, shared, requested),
            TensorPlan::matrix(name("ffn_up_shexp"), dim, shared, requested),
            TensorPlan::matrix(name("ffn_down_shexp"), shared, dim, requested),
        ]);
    }
}

/// Bytes of rows a [`RowSource`] generates at a time (at least one row).
const BATCH_BYTES: usize = 4 << 20;

/// A [`Read`] that generates a tensor's bytes a batch of rows at a time
/// (about [`BATCH_BYTES`]), so the file is never held in memory. The rows of
/// a batch are drawn and quantized on every core: each thread starts its rows'
/// generator at their offset in the tensor's stream, so the bytes are those
/// of one sequential pass, whatever the number of threads.
pub(crate) struct RowSource {
    /// The generator at the first value of the next row to draw.
    rng: SplitMix64,
    init: Init,
    dtype: DType,
    row_elems: usize,
    row_bytes: usize,
    rows_left: usize,
    /// The current batch's encoded rows.
    encoded: Vec<u8>,
    /// How much of `encoded` has been handed out.
    position: usize,
}

impl RowSource {
    /// Draws and encodes the next batch of rows into `encoded`.
    fn next_batch(&mut self) -> io::Result<()> {
        let rows = (BATCH_BYTES / self.row_bytes).clamp(1, self.rows_left);
        self.encoded.resize(rows * self.row_bytes, 0);
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(rows);
        let rows_per_thread = rows.div_ceil(threads);
        let (rng, init, dtype, row_elems, row_bytes) =
            (&self.rng, self.init, self.dtype, self.row_elems, self.row_bytes);
        let draw = |first_row: usize, out: &mut [u8]| -> io::Result<()> {
            let mut rng = rng.skipped((first_row * row_elems) as u64);
            let mut values = vec![0.0; row_elems];
            for row in out.chunks_mut(row_bytes) {
                for (i, value) in values.iter_mut().enumerate() {
                    let noise = rng.next_normal();
                    *value = match init {
                        Init::Noise { std } => std * noise,
                        Init::NearOne => 1.0 + 0.1 * noise,
                        Init::Near(v) => v * (1.0 + 0.1 * noise),
                        Init::Decay => -(0.5 * noise).exp(),
                        Init::RopeFactors { rotated } if i < rotated => 1.0,
                        Init::RopeFactors { .. } => 1e30,
                    };
                }
                quantize_row(dtype, &values, row).map_err(io::Error::other)?;
            }
            Ok(())
        };
        if threads == 1 {
            draw(0, &mut self.encoded)?;
        } else {
            std::thread::scope(|scope| {
                let handles: Vec<_> = self
                    .encoded
                    .chunks_mut(rows_per_thread * row_bytes)
                    .enumerate()
                    .map(|(i, out)| scope.spawn(move || draw(i * rows_per_thread, out)))
                    .collect();
                handles
                    .into_iter()
                    .try_for_each(|h| h.join().map_err(|_| io::Error::other("a synth thread panicked"))?)
            })?;
        }
        self.rng = self.rng.skipped((rows * self.row_elems) as u64);
        self.rows_left -= rows;
        self.position = 0;
        Ok(())
    }
}

impl Read for RowSource {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut written = 0;
        while written < buf.len() {
            if self.position == self.encoded.len() {
                if self.rows_left == 0 {
                    break;
                }
                if self.row_bytes == 0 {
                    return Err(io::Error::other(format!(
                        "synthetic tensor rows of {} {} values are not whole blocks",
                        self.row_elems, self.dtype
                    )));
                }
                self.next_batch()?;
            }
            let available = &self.encoded[self.position..];
            let n = available.len().min(buf.len() - written);
            buf[written..written + n].copy_from_slice(&available[..n]);
            self.position += n;
            written += n;
        }
        Ok(written)
    }
}

// How many tensors a shape has and how many weights they hold: counted
// from the same plan the writer follows.
impl ShapeParams {
    /// The number of tensors in the file: the embedding, those of every
    /// block (nine, plus the architecture's biases and extra norms), the
    /// output norm and, unless tied, the output projection.
    pub fn tensor_count(&self) -> usize {
        plan(self, DType::F32).len()
    }

    /// The number of weights in the file (every tensor's element count).
    pub fn n_params(&self) -> u64 {
        plan(self, DType::F32).iter().map(TensorPlan::elements).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SynthShape;

    /// The rows drawn and encoded one after another from one generator:
    /// what the batched, threaded source must reproduce.
    fn sequential_bytes(plan: &TensorPlan, seed: u64) -> Vec<u8> {
        let cols = plan.dims[0] as usize;
        let mut rng = SplitMix64::for_tensor(seed, &plan.name);
        let mut values = vec![0.0; cols];
        let mut row = vec![0; plan.dtype.row_bytes(cols).unwrap()];
        let mut out = Vec::new();
        for _ in 0..plan.dims[1] {
            values.iter_mut().for_each(|v| *v = 0.5 * rng.next_normal());
            quantize_row(plan.dtype, &values, &mut row).unwrap();
            out.extend_from_slice(&row);
        }
        out
    }

    #[test]
    fn batched_rows_on_every_core_are_the_bytes_of_one_sequential_pass() {
        // 4 KiB rows (F32) and 2,304-byte rows (Q4_K), enough of them for
        // two batches and a short last one.
        for (dtype, cols, rows) in [(DType::F32, 1024, 1_100), (DType::Q4_K, 4096, 2_000)] {
            let mut plan = TensorPlan::matrix("blk.0.ffn_up.weight".into(), cols, rows, dtype);
            plan.init = Init::Noise { std: 0.5 };
            let mut written = Vec::new();
            plan.source(9).read_to_end(&mut written).unwrap();
            assert!(written.len() > BATCH_BYTES, "{dtype}: more than one batch");
            assert!(written == sequential_bytes(&plan, 9), "{dtype}");
        }
    }

    #[test]
    fn q4_k_m_gives_the_output_and_a_share_of_attn_v_and_ffn_down_six_bits() {
        for (shape, output) in [(SynthShape::Llama8B, "output.weight"), (SynthShape::Llama1B, "token_embd.weight")] {
            let params = shape.params();
            let mut plan = plan(&params, DType::Q4_K);
            apply_mix(&mut plan, SynthMix::Q4KM, &params);
            let six: Vec<&str> = plan.iter().filter(|t| t.dtype == DType::Q6_K).map(|t| t.name.as_str()).collect();
            assert!(six.contains(&output), "{shape}: {six:?}");
            let layers: Vec<usize> = (0..params.n_layers).filter(|&l| more_bits(l, params.n_layers)).collect();
            for l in &layers {
                assert!(six.contains(&format!("blk.{l}.ffn_down.weight").as_str()), "{shape} layer {l}");
                assert!(six.contains(&format!("blk.{l}.attn_v.weight").as_str()), "{shape} layer {l}");
            }
            assert_eq!(six.len(), 2 * layers.len() + 1, "{shape}: nothing else is six bits: {six:?}");
            let other = plan.iter().filter(|t| t.dims.len() == 2 && t.dtype != DType::Q6_K);
            assert!(other.clone().all(|t| t.dtype == DType::Q4_K), "{shape}: the rest is Q4_K");
        }
        // llama.cpp's pattern for 32 layers: the first and last four, and
        // every third layer between from the sixth.
        let wide: Vec<usize> = (0..32).filter(|&l| more_bits(l, 32)).collect();
        assert_eq!(wide, [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]);
    }

    #[test]
    fn mxfp4_moe_puts_the_experts_in_mxfp4_and_the_other_matrices_in_q8_0() {
        let params = SynthShape::GptOss.params();
        let mut plan = plan(&params, DType::Q8_0);
        apply_mix(&mut plan, SynthMix::Mxfp4Moe, &params);
        for t in &plan {
            let want = if t.name.ends_with("_exps.weight") {
                DType::MXFP4
            } else if t.dims.len() == 1 || t.name.contains("ffn_gate_inp") || t.name.ends_with(".bias") {
                DType::F32
            } else {
                DType::Q8_0
            };
            assert_eq!(t.dtype, want, "{}", t.name);
        }
    }
}
