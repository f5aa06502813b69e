//! The operations a llama decoder needs. Each op's exact semantics are
//! stated here once; every backend implements exactly this.

/// Key positions [`Op::Attention`] takes at a time: a row's online softmax
/// is updated once per block, blocks counted from position 0.
pub const ATTENTION_BLOCK: usize = 64;

/// How RoPE pairs the elements of a head.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RopeMode {
    /// Rotate adjacent pairs `(2i, 2i+1)` (GGUF llama models).
    Normal,
    /// Rotate pairs `(i, i + dims/2)` (NeoX, Qwen, Phi…).
    Neox,
}

/// YaRN's position scaling of RoPE (llama.cpp's `rope_yarn`): pair `i`'s
/// angle blends the interpolated angle `freq_scale · θ` with the
/// extrapolated `θ = pos · freq_base^(-2i/dims)` by a ramp over the pairs
/// `low..high` (`ramp = 1 - clamp((i - low) / max(0.001, high - low), 0,
/// 1)`, scaled by `ext_factor`): `angle = interp (1 - ramp) + extrap ·
/// ramp`, and cos and sin are multiplied by `attn_factor · (1 + 0.1 ·
/// ln(1 / freq_scale))`. `low = max(0, floor(c(beta_fast)))` and `high =
/// min(dims - 1, ceil(c(beta_slow)))` with `c(b) = dims · ln(orig_context
/// / (2π b)) / (2 ln freq_base)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Yarn {
    /// The context the model was trained at before scaling.
    pub orig_context: usize,
    /// How much of the ramp applies (1 in every model that uses YaRN).
    pub ext_factor: f32,
    /// Multiplies the magnitude factor.
    pub attn_factor: f32,
    /// Rotations per training context where the ramp starts (32).
    pub beta_fast: f32,
    /// Rotations per training context where it ends (1).
    pub beta_slow: f32,
}

/// An operation: the node's inputs are listed in the order stated.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// A leaf: an input, weight or state tensor bound to memory at compute.
    Leaf,
    /// `(table [V, D], ids [T] i32) -> [T, D] f32`: row lookup, dequantizing.
    GetRows,
    /// `(x [B.., M, K] f32, w [Bw.., N, K] any type) -> [B.., M, N] f32`:
    /// `y = x · wᵀ`, the GGUF weight layout. Batch dimensions of `w` divide
    /// those of `x` and are broadcast (grouped-query attention: x batch `b`
    /// uses w batch `b / (B / Bw)`). Rows of `w` must be contiguous.
    ///
    /// With block-quantized `w`, `x` is first rounded to 8 bits per weight
    /// block (32 values, 256 for K-quants), in f32: `d = amax / 127`,
    /// `q = round_half_even(x * (1 / d))` (`q = 0` where `d = 0`), and the
    /// product uses `d * q`. Every backend rounds the same way, so backends
    /// differ only in the order of their f32 sums.
    MatMul,
    /// `(a, b) -> a + b`, `b` broadcast over `a` (each dim equal or 1).
    Add,
    /// `(a, b) -> a * b`, broadcast like `Add`.
    Mul,
    /// `(a) -> a * factor`.
    Scale(f32),
    /// `(x) -> x / sqrt(mean(x²) + eps)` over the last dimension.
    RmsNorm {
        /// Added to the mean square.
        eps: f32,
    },
    /// `(x [T, H, D] f32, positions [T] i32) -> [T, H, D]`: rotary embedding
    /// of the first `dims` elements of each head with angle
    /// `pos * freq_scale * freq_base^(-2i/dims)`. With `rotated_pairs:
    /// Some(n)`, only pairs `i < n` rotate; the others keep their values
    /// (a frequency factor of infinity on them: Gemma 4's proportional
    /// RoPE, whose full layers pair `(i, i + D/2)` over the whole head with
    /// the exponent over the whole head, but rotate only the first
    /// quarter of the pairs).
    Rope {
        /// Pairing of elements.
        mode: RopeMode,
        /// Elements of each head that rotate.
        dims: usize,
        /// Base of the frequencies.
        freq_base: f32,
        /// Linear position scaling (1 / factor).
        freq_scale: f32,
        /// YaRN's blend of interpolated and extrapolated angles (`None`:
        /// every angle is scaled by `freq_scale`).
        yarn: Option<Yarn>,
        /// Pairs that rotate, counted from the first (`None`: all
        /// `dims / 2`).
        rotated_pairs: Option<usize>,
    },
    /// `(x [.., T, S]) -> softmax(x * scale)` over the last dimension. With
    /// `causal`, query row `t` may attend key `s` only if `s <= t + (S - T)`
    /// (queries are the last `T` of `S` positions); masked entries are 0.
    /// With a second input `positions [T]` (i32), row `t` may attend key `s`
    /// only if `s <= positions[t]` instead, so `S` can be a padded window
    /// and the graph stays the same from one decode step to the next.
    /// With a `window` (positions only), row `t` also may not attend keys
    /// `s <= positions[t] - window`: it sees the last `window` positions
    /// up to its own (sliding-window attention, as Gemma's local layers).
    Softmax {
        /// Multiplies the logits first.
        scale: f32,
        /// Whether to apply the causal mask.
        causal: bool,
        /// Keys a row sees at most, ending at its own position (`None`:
        /// every earlier key).
        window: Option<usize>,
    },
    /// `(q [T, H, D] f32, k [Hk, S, D], v [Hk, S, D], positions [T] i32)
    /// -> [T, H, D] f32`: attention of every query row over the cache,
    /// streamed. Head `h` reads key-value head `h / (H / Hk)` (grouped-query
    /// attention; `H` is a multiple of `Hk`). Row `t` sees the key
    /// positions `s <= positions[t]`, and with a `window` only those with
    /// `s > positions[t] - window`; a row that sees none is 0. Position
    /// `s` is row `s mod S` of `k` and `v`: a cache of every position
    /// (`S` past the last one), or a ring of the last `S` (a sliding-window
    /// layer's). A row that sees more than `S` positions is an error.
    ///
    /// `out[t, h] = Σ_s p_s v_s` with `p = softmax_s(scale · q[t, h] · k_s)`,
    /// keys and values of any type converted to f32 first. Keys are taken
    /// in blocks of [`ATTENTION_BLOCK`] positions counted from 0, with a
    /// running maximum and sum (online softmax), so no row of scores is
    /// ever held whole and memory does not grow with the context. Each
    /// row's result depends on its own query, position and keys only: not
    /// on `T`, `S` past its keys, or the other rows. The rows of `k` and
    /// `v` must be contiguous (a quantized cache is rows of whole blocks).
    ///
    /// **In slots** (`slot_rows: Some(R)`, a fifth input `slots [T]` i32):
    /// `k` and `v` hold `S / R` caches of `R` rows each, one per sequence,
    /// and row `t` reads cache `slots[t]`: its position `s` is row
    /// `slots[t] · R + (s mod R)`. So one op attends every sequence of a
    /// batched decode step, each over its own cache, and each row's result
    /// is bit for bit what the op gives it over that cache alone. A slot
    /// outside `0..S / R` is an error.
    ///
    /// **In blocks** (`paged: true`, with slots; a sixth input `table [Q,
    /// R / ATTENTION_BLOCK]` i32 after `slots`; `R` a multiple of
    /// [`ATTENTION_BLOCK`]): `k` and `v` are a pool of `S /
    /// ATTENTION_BLOCK` blocks of [`ATTENTION_BLOCK`] rows shared by `Q`
    /// sequences, and row `t` reads sequence `slots[t]`'s blocks: its
    /// position `s` is row `table[slots[t], r / B] · B + r mod B` with `r =
    /// s mod R` and `B` = [`ATTENTION_BLOCK`] (a paged cache; sequences may
    /// share blocks). The bits are those over the same keys in one run of
    /// rows. A slot outside `0..Q` or an entry outside the pool is an error.
    ///
    /// **With sinks** (`sinks: true`, a last input `sinks [H]` f32): head
    /// `h`'s softmax also counts a key of logit `sinks[h]` (not scaled)
    /// whose value is zero, so the weights of the real keys sum to less
    /// than one (gpt-oss's attention sinks): `p_s = exp(w_s - m) / (Σ
    /// exp(w_s - m) + exp(sinks[h] - m))`, `m` the largest of the `w_s`
    /// and the sink. A row that sees no key is 0.
    Attention {
        /// Multiplies the scores first.
        scale: f32,
        /// Keys a row sees at most, ending at its own position (`None`:
        /// every earlier key).
        window: Option<usize>,
        /// Rows of each sequence's cache, when `k` and `v` hold several
        /// (`None`: one cache of `S` rows, four inputs).
        slot_rows: Option<usize>,
        /// A last input of one sink logit per query head.
        sinks: bool,
        /// Sequences' rows are blocks of a pool, found through a table
        /// input (with `slot_rows` only).
        paged: bool,
    },
    /// `(gate, up) -> x σ(alpha x) (y + 1)` with `x = min(gate, limit)` and
    /// `y = clamp(up, -limit, limit)`, elementwise (`gate` and `up` of one
    /// shape): gpt-oss's clamped SwiGLU.
    SwiGluClamped {
        /// The sigmoid's slope (1.702).
        alpha: f32,
        /// The clamp (7).
        limit: f32,
    },
    /// `(x) -> x * sigmoid(x)`.
    Silu,
    /// `(x) -> 0.5 x (1 + tanh(sqrt(2/π) (x + 0.044715 x³)))`: GELU in its
    /// tanh form (Gemma's feed-forward gate).
    Gelu,
    /// `(dst [N, ..], src [T, ..], rows [T] i32) -> dst`: writes row `t` of
    /// `src` into row `rows[t]` of `dst` (a view of a leaf, e.g. the KV cache
    /// seen as `[positions, ..]`), converting the type; the node aliases
    /// `dst`. A row index outside `0..N` is an error. With the indices an
    /// input, the graph does not change from one decode step to the next.
    /// A quantized `dst` (a quantized KV cache) takes rows of whole blocks,
    /// each row quantized as [`MatMul`](Op::MatMul) rounds activations'
    /// blocks (the type's reference quantizer).
    ScatterRows,
    /// `(dst, src) -> dst`: writes `src` into `dst` (a view of a leaf, e.g.
    /// the KV cache), converting the type; the node aliases `dst`.
    CopyInto,
    /// `(x) -> x` laid out contiguously.
    Contiguous,
    /// `(x [.., N] f32) -> [.., k] i32`: the indices of each row's `k`
    /// largest values, the largest first; equal values in order of index
    /// (the lower first); NaN ranks below every number. A mixture of
    /// experts' router picks each token's experts with it. `1 <= k <= N`.
    TopK {
        /// Indices kept per row.
        k: usize,
    },
    /// `(x [.., N] f32, ids [.., k] i32) -> [.., k] f32`: `out[.., j] =
    /// x[.., ids[.., j]]`, row by row (the leading dimensions of `x` and
    /// `ids` are the same). An index outside `0..N` is an error.
    TakeColumns,
    /// `(x [T, S, K] f32, w [E, N, K] any type, ids [T, k] i32) -> [T, k,
    /// N] f32`, with `S` 1 or `k`: `out[t, j] = x[t, s] · w[ids[t, j]]ᵀ`
    /// where `s` is `j` (or 0 when `S` is 1: one input row for all of a
    /// token's experts). Each token is multiplied only by the experts it
    /// chose; rounded as [`MatMul`](Op::MatMul) rounds (activations to 8
    /// bits per weight block for quantized `w`), and each output row
    /// depends only on its own input row and expert, never on which other
    /// rows chose the same expert (so batched steps stay batch-invariant).
    /// The rows of each expert's matrix must be contiguous. An id outside
    /// `0..E` is an error.
    MatMulId,
    /// `(x [T, S, K] f32, w [E, N, K] any type, ids [T, k] i32) -> [T, k,
    /// N] f32`: [`MatMulId`](Op::MatMulId) over one device's share of a
    /// layer's experts (an expert-parallel split), `w` holding experts
    /// `first..first + E`. A row whose id is in that range is multiplied
    /// by `w[id - first]`, with the bits `MatMulId` over every expert
    /// gives it; any other row is `-0.0` (the one value that, added to the
    /// row of the share holding its expert, leaves that row's bits
    /// unchanged). A negative id is an error.
    MatMulIdShare {
        /// The layer's index of `w`'s first expert.
        first: usize,
    },
    /// `(x [.., R, C] f32) -> [.., C]`: the `R` rows of each matrix summed
    /// in order, `((x₀ + x₁) + x₂) + …` (a token's expert outputs, each
    /// already weighted).
    SumRows,
    /// `(x) -> 1 / (1 + exp(-x))`, elementwise.
    Sigmoid,
    /// `(x) -> x` where `x > 20`, else `ln(1 + exp(x))`, elementwise
    /// (ggml's softplus: Gated DeltaNet's decay).
    Softplus,
    /// `(x) -> x / max(sqrt(Σ x²), eps)` over the last dimension (ggml's L2
    /// norm: Gated DeltaNet's queries and keys).
    L2Norm {
        /// The least divisor.
        eps: f32,
    },
    /// `(state [S, C, K-1] f32, x [T, C] f32, w [C, K] f32, slots [T] i32,
    /// positions [T] i32) -> [T, C] f32`: a short causal convolution per
    /// channel, with the last `K - 1` inputs of each sequence kept in
    /// `state` (one per slot). Rows are taken in order; row `t` belongs to
    /// the sequence in slot `s = slots[t]`. If `positions[t]` is 0 the
    /// slot's state is zeroed first (a sequence starts). Then `out[t, c] =
    /// Σ_{i < K-1} state[s, c, i] · w[c, i] + x[t, c] · w[c, K-1]`, summed
    /// in that order (oldest input first), and the state shifts by one:
    /// `state[s, c] = (state[s, c, 1..], x[t, c])`.
    ///
    /// **The op writes `state` in place** (it is a state leaf, or a view of
    /// one): later nodes, and later computations, see the shifted state. A
    /// row's output depends only on its own slot's rows before it and its
    /// own input, never on the other slots' rows in the batch. A slot
    /// outside `0..S` is an error.
    ///
    /// With two more inputs, `(kept [R, C, K-1] f32, keep [T] i32)`, the
    /// state after each row `t` with `keep[t] >= 0` is also copied to row
    /// `keep[t]` of `kept` (a state leaf too, written in place): the
    /// states after each position of a verification step, one of which
    /// becomes the sequence's once the drafts it accepts are known. A
    /// `keep[t]` outside `-1..R` is an error.
    SsmConv,
    /// `(state [S, H, Dv, Dk] f32, q [T, Hk, Dk] f32, k [T, Hk, Dk] f32, v
    /// [T, H, Dv] f32, g [T, H] f32, beta [T, H] f32, slots [T] i32,
    /// positions [T] i32) -> [T, H, Dv] f32`: the gated delta rule (Gated
    /// DeltaNet), a recurrent state of `Dv × Dk` per head and sequence.
    /// Value head `h` reads query and key head `h mod Hk` (`H` a multiple
    /// of `Hk`). Rows are taken in order; row `t` updates slot `s =
    /// slots[t]`'s state, zeroed first where `positions[t]` is 0. For each
    /// head, with `S_j = state[s, h, j]` (a row of `Dk` values):
    ///
    /// `S_j *= exp(g[t, h])`; `d_j = (v[t, h, j] - S_j · k) · beta[t, h]`;
    /// `S_j += d_j k`; `out[t, h, j] = (S_j · q) · scale`,
    ///
    /// each dot product summed in an order that depends on `Dk` alone. As
    /// [`SsmConv`](Op::SsmConv),
    /// **the op writes `state` in place**, and a row's output depends only
    /// on its own slot's rows before it, so batches stay batch-invariant.
    ///
    /// With `chunk` above 0, a backend may instead take each run of one
    /// slot's consecutive positions `chunk` rows at a time in the chunked
    /// (WY) form of the same rule: the results then agree with the row by
    /// row form to float rounding only, and their bits depend on where the
    /// runs start (how a prompt was split into steps), so batches are no
    /// longer bit-invariant.
    ///
    /// With two more inputs, `(kept [R, H, Dv, Dk] f32, keep [T] i32)`, as
    /// [`SsmConv`](Op::SsmConv)'s: the state after each row `t` with
    /// `keep[t] >= 0` is copied to row `keep[t]` of `kept`; the rows are
    /// then taken one by one whatever `chunk` says, so each copy holds the
    /// bits of the state after decoding that row alone.
    GatedDeltaNet {
        /// Multiplies each output (`1 / sqrt(Dk)`).
        scale: f32,
        /// Rows per chunk of the chunked form; 0: row by row.
        chunk: usize,
    },
    /// `(x) -> x` seen through another layout of the same storage (reshape,
    /// permute, slice); costs nothing.
    View,
}

impl Op {
    /// Short lower-case name for plans and traces.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Leaf => "leaf",
            Op::GetRows => "get_rows",
            Op::MatMul => "matmul",
            Op::Add => "add",
            Op::Mul => "mul",
            Op::Scale(_) => "scale",
            Op::RmsNorm { .. } => "rms_norm",
            Op::Rope { .. } => "rope",
            Op::Softmax { .. } => "softmax",
            Op::Attention { .. } => "attention",
            Op::Silu => "silu",
            Op::Gelu => "gelu",
            Op::SwiGluClamped { .. } => "swiglu_clamped",
            Op::CopyInto => "copy_into",
            Op::ScatterRows => "scatter_rows",
            Op::Contiguous => "contiguous",
            Op::TopK { .. } => "top_k",
            Op::TakeColumns => "take_columns",
            Op::MatMulId => "matmul_id",
            Op::MatMulIdShare { .. } => "matmul_id_share",
            Op::SumRows => "sum_rows",
            Op::Sigmoid => "sigmoid",
            Op::Softplus => "softplus",
            Op::L2Norm { .. } => "l2_norm",
            Op::SsmConv => "ssm_conv",
            Op::GatedDeltaNet { .. } => "gated_delta_net",
            Op::View => "view",
        }
    }

    /// Whether the node aliases its first input's storage instead of
    /// owning its own.
    pub fn aliases_input(&self) -> bool {
        matches!(self, Op::View | Op::CopyInto | Op::ScatterRows)
    }

    /// Whether the node writes its first input (a state leaf) in place
    /// besides computing its own output ([`Op::SsmConv`],
    /// [`Op::GatedDeltaNet`]).
    pub fn writes_state(&self) -> bool {
        matches!(self, Op::SsmConv | Op::GatedDeltaNet { .. })
    }
}
