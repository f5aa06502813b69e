#!/usr/bin/env python3
"""Independent NumPy reference for the llama-family forward pass, as
llama.cpp computes it for GGUF files with ``general.architecture`` one of
``llama``, ``qwen2``, ``qwen3``, ``gemma3``, ``qwen3moe``, ``gpt-oss``,
``qwen35`` and ``qwen35moe`` (see ARCH_TRAITS; the recurrent layers of the
last two are in ``hybrid_ref.py``), and ``gemma4`` (its own forward, in
``gemma4_ref.py``).

Baton (the Rust runtime) is checked against this file: its logits, its
greedy generations and its perplexity figures.  Nothing here is shared with
the Rust code; the only third-party pieces are the PyPI ``gguf`` package
(file parsing and dequantization), ``numpy`` and, for the ``generate``
sub-command only, ``tokenizers``.

Usage
-----
::

    llama_ref.py logits MODEL --tokens 1,2,3 [--last K] [--out FILE.json|FILE.npy]
    llama_ref.py perplexity MODEL --tokens-file ids.json --ctx 256 [--chunks N]
    llama_ref.py perplexity MODEL --text-file FILE --ctx 256 [--chunks N]
    llama_ref.py generate MODEL --prompt "Once upon a time" [--n 20]
    llama_ref.py generate MODEL --tokens 1,2,3 [--n 20]

``logits`` writes ``{"n_vocab": V, "positions": [...], "logits": [[...], ...]}``
(one row per position; ``--last K`` keeps only the last K positions) as JSON,
or, when the output name ends in ``.npy``, a float32 array of shape
(positions, n_vocab).  Without ``--out`` the JSON goes to stdout.

``perplexity`` prints ``{"ppl", "nll_mean", "chunks", "tokens_scored", ...}``.
``--tokens-file`` is a JSON list of token ids (or an object with a "tokens"
list) already tokenized by the caller, including a leading BOS if the model
wants one.  ``--text-file`` tokenizes a text with the tokenizer built in
this file (see ``build_tokenizer``; BPE ``gpt2`` vocabularies only).

``generate`` greedily extends a prompt (full recompute per step, no KV
cache) and prints the ids and the decoded text as JSON.

Conventions (each verified against the real SmolLM2 GGUF and the sources
named below)
--------------------------------------------------------------------------
* Shapes.  GGUF stores tensor dimensions in ggml order (dim 0 is the
  innermost, contiguous one).  ``gguf.GGUFReader`` reports ``tensor.shape`` in
  that ggml order (e.g. ``attn_k.weight``: ``[576, 192]``), while
  ``tensor.data`` is already reshaped to the reversed (NumPy, row-major)
  order: for a quantized tensor it is ``(rows, bytes_per_row)`` uint8, and
  ``gguf.quants.dequantize(data, type)`` turns it into float32
  ``(rows, row_len)`` = ``(192, 576)``.  So a weight with ggml dims ``[k, n]``
  becomes a NumPy array ``W`` of shape ``(n, k)`` and a layer computes
  ``y = x @ W.T``.  ``load_tensor`` asserts this for every tensor.
* Embedding: row ``t`` of ``token_embd.weight`` (shape ``(n_vocab, dim)``).
  ``output.weight`` absent => the output projection is tied to
  ``token_embd.weight`` (this is the case for SmolLM2-135M).
* RMS norm: ``x / sqrt(mean(x^2) + eps) * weight``, eps from
  ``llama.attention.layer_norm_rms_epsilon``.
* RoPE: the llama architecture uses ggml's "normal" rope mode (mode 0):
  adjacent pairs ``(x[2i], x[2i+1])`` of each head are rotated by
  ``theta_i = pos * freq_scale * base^(-2i/rope_dims)`` for
  ``i < rope_dims/2``; dims beyond ``rope_dims`` pass through.  (The HF
  convert script permutes the Q/K rows so that this equals HF's
  ``rotate_half`` on the original checkpoint.)  ``freq_scale = 1/factor``
  for ``llama.rope.scaling.type = linear`` (or the legacy
  ``llama.rope.scale_linear``); ``base`` = ``llama.rope.freq_base``
  (default 10000); ``rope_dims`` = ``llama.rope.dimension_count`` (default
  head_dim).  When a ``rope_freqs.weight`` tensor exists (llama-3.1 style
  frequency factors) ``theta_i`` is divided by factor ``i``, as ggml's
  ``rope_ext`` does.  YaRN and other scaling types are rejected.
* Attention: grouped-query; query head ``h`` uses KV head
  ``h // (n_head / n_head_kv)``; scores scaled by ``1/sqrt(head_dim)``;
  causal mask; softmax in float64 (everything is float64 by default).
* FFN: SwiGLU, ``down(silu(gate(x)) * up(x))``, ``silu(z) = z / (1 + e^-z)``.
* Block: ``h = x + attn_output(attn(attn_norm(x)))``;
  ``out = h + ffn(ffn_norm(h))``; logits = ``output(output_norm(out))``.
* Precision: weights are dequantized once by ``gguf`` to float32 and then
  widened to float64 (default) or kept float32 (``--dtype float32``); all
  activations, softmaxes and log-softmaxes use the chosen dtype, so the
  default reference is float64 end to end on the dequantized weights.
  ggml itself computes in float32 (and, on CPU, quantizes activations to
  Q8 for quantized matmuls), so expect differences around 1e-2 in logits
  between this reference and llama.cpp/Baton for Q4 models.

Perplexity, as llama.cpp's ``llama-perplexity`` computes it (checked in
``tools/perplexity/perplexity.cpp``, function ``perplexity``):

* the token list is the tokenized text (``common_tokenize(..., add_special=
  true)``, so a BOS is prepended when the vocabulary's add_bos flag is set);
* ``n_chunk = min(--chunks, len(tokens) // ctx)``; chunk ``c`` is
  ``tokens[c*ctx:(c+1)*ctx]``, each evaluated from an empty KV cache at
  positions ``0..ctx-1``;
* when ``tokenizer.ggml.add_bos_token`` is true, the first token of every
  chunk is replaced by BOS for the forward pass (the replaced token is never
  a scoring target, so the targets are unchanged);
* with ``first = ctx // 2``, positions ``j = first .. ctx-2`` are scored:
  ``nll += -log softmax(logits[j])[chunk[j+1]]``, i.e. ``ctx - 1 - first``
  tokens per chunk;
* ``ppl = exp(sum(nll) / count)``.
llama.cpp requires at least ``2*ctx`` tokens; here that is only a warning.

If ``tokenizer.ggml.add_bos_token`` is absent the flag is taken as false
here; llama.cpp has per-vocabulary-type defaults (true for SentencePiece
``llama`` vocabularies), so pass ``--add-bos``/``--no-add-bos`` to override.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

try:
    import gguf
except ImportError:  # pragma: no cover - environment problem
    sys.exit("llama_ref.py needs the PyPI 'gguf' package (scripts/setup-python.sh)")


# --------------------------------------------------------------------------
# GGUF access
# --------------------------------------------------------------------------

# Query rows of one attention product (bounds the score matrix's memory).
ATTENTION_CHUNK = 512


def field_value(reader: "gguf.GGUFReader", key: str, default: Any = None) -> Any:
    """Return a metadata value (scalar, string or list) or ``default``."""
    field = reader.fields.get(key)
    if field is None:
        return default
    return field.contents()


def load_tensor(t: "gguf.ReaderTensor") -> np.ndarray:
    """Dequantize one tensor to float32 in NumPy order (ggml dims reversed)."""
    name = t.name
    w = gguf.quants.dequantize(t.data, t.tensor_type)
    ggml_dims = [int(d) for d in t.shape]
    expected = tuple(reversed(ggml_dims))
    if w.shape != expected:
        # Some gguf versions may return a flat array; reshape explicitly.
        if w.size != math.prod(expected):
            raise ValueError(f"{name}: dequantized {w.shape} vs ggml dims {ggml_dims}")
        w = w.reshape(expected)
    return np.ascontiguousarray(w, dtype=np.float32)


# What differs from llama, per architecture (checked against the GGUF
# converter and llama.cpp's model sources; notes in
# shared/research/llama-family-architectures.md):
#   neox       RoPE rotates pairs (i, i + rope_dims/2) instead of (2i, 2i+1)
#   qkv_bias   attn_{q,k,v}.bias are added to the projections
#   qk_norm    per-head RMS norm of q and k (attn_{q,k}_norm, head_dim wide),
#              before RoPE
#   post_norms post_attention_norm / post_ffw_norm on the block outputs,
#              before the residual add
#   gelu       FFN gate is GELU (tanh form) instead of SiLU
#   embd_scale token embeddings times sqrt(n_embd)
#   swa_period layers i with i % period != period - 1 attend a sliding
#              window of `sliding_window` keys, with RoPE base 10000 and
#              no position scaling (Gemma 3)
#   moe        the FFN is a mixture of experts: router ffn_gate_inp scores
#              the expert_count experts, softmax over all of them, the
#              expert_used_count most probable run (ties to the lower
#              index), their probabilities renormalised to sum 1, each
#              expert a SwiGLU block (ffn_{gate,up,down}_exps stacked
#              along the slowest ggml axis), outputs summed by weight
#              (qwen3moe: llama.cpp's build_moe_ffn with softmax gating
#              and normalised weights)
#   gptoss     gpt-oss: biases on q, k, v and the attention output, a sink
#              logit per head counted in every softmax's denominator
#              (attn_sinks, not scaled, no value), even layers slide
#              (window of attention.sliding_window keys) with the same
#              RoPE as odd ones, the FFN norm is post_attention_norm, the
#              router has a bias and picks the top-k raw logits weighted
#              by their softmax, experts have biases and a clamped SwiGLU
#              x*sigmoid(1.702x)*(y+1), x = min(gate, 7), y = clamp(up, +-7)
#   hybrid     qwen35, qwen35moe: three of four layers are recurrent (Gated
#              DeltaNet, hybrid_ref.py); the others' attn_q gives each head
#              its query and an output gate ([q | gate] per head), the
#              output times sigmoid(gate); the FFN norm is
#              post_attention_norm; the experts have a shared expert,
#              weighted by sigmoid(ffn_gate_inp_shexp . x); blocks past
#              block_count - nextn_predict_layers are not run
#   yarn       (any architecture whose rope.scaling.type is "yarn") ggml's
#              rope_yarn: per pair i, theta_extrap = pos*base^(-2i/dims),
#              theta_interp = theta_extrap/factor, ramp over the pairs
#              low..high, magnitude 1 + 0.1 ln(factor) on cos and sin
# Gemma's norm weights are stored with their +1 already added by the
# converter, so every norm multiplies by the stored weight.
ARCH_TRAITS: dict[str, dict[str, Any]] = {
    "llama": dict(neox=False, qkv_bias=False, qk_norm=False, post_norms=False,
                  gelu=False, embd_scale=False, swa_period=None, moe=False, gptoss=False),
    "qwen2": dict(neox=True, qkv_bias=True, qk_norm=False, post_norms=False,
                  gelu=False, embd_scale=False, swa_period=None, moe=False, gptoss=False),
    "qwen3": dict(neox=True, qkv_bias=False, qk_norm=True, post_norms=False,
                  gelu=False, embd_scale=False, swa_period=None, moe=False, gptoss=False),
    "gemma3": dict(neox=True, qkv_bias=False, qk_norm=True, post_norms=True,
                   gelu=True, embd_scale=True, swa_period=6, moe=False, gptoss=False),
    "qwen3moe": dict(neox=True, qkv_bias=False, qk_norm=True, post_norms=False,
                     gelu=False, embd_scale=False, swa_period=None, moe=True, gptoss=False),
    "gpt-oss": dict(neox=True, qkv_bias=True, qk_norm=False, post_norms=False,
                    gelu=False, embd_scale=False, swa_period=2, moe=True, gptoss=True),
    "qwen35": dict(neox=True, qkv_bias=False, qk_norm=True, post_norms=False, gelu=False,
                   embd_scale=False, swa_period=None, moe=False, gptoss=False, hybrid=True),
    "qwen35moe": dict(neox=True, qkv_bias=False, qk_norm=True, post_norms=False, gelu=False,
                      embd_scale=False, swa_period=None, moe=True, gptoss=False, hybrid=True),
}
SWA_ROPE_BASE = 10000.0


@dataclass
class LlamaConfig:
    arch: str
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    n_ff: int
    eps: float
    rope_base: float
    rope_dims: int
    freq_scale: float
    n_ctx_train: int
    n_vocab: int
    bos_id: int | None
    eos_id: int | None
    add_bos: bool | None  # None: the file does not say
    head_dim: int
    sliding_window: int | None
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    yarn_orig_ctx: int | None = None  # set when rope.scaling.type is yarn
    yarn_attn_factor: float = 1.0
    recurrent: Any = None  # hybrid_ref.RecurrentConfig (qwen35, qwen35moe)

    @property
    def traits(self) -> dict[str, Any]:
        return ARCH_TRAITS[self.arch]

    @property
    def attn_scale(self) -> float:
        # Gemma 3 27B (62 layers) scales by n_embd / n_head instead.
        if self.arch == "gemma3" and self.n_layer == 62:
            return 1.0 / math.sqrt(self.n_embd // self.n_head)
        return 1.0 / math.sqrt(self.head_dim)

    def layer_rope(self, il: int) -> tuple[float, float, int | None]:
        """(rope base, position scale, window or None) of layer il."""
        period = self.traits["swa_period"]
        if period is not None and self.sliding_window and il % period != period - 1:
            if self.traits["gptoss"]:
                return self.rope_base, self.freq_scale, self.sliding_window
            return SWA_ROPE_BASE, 1.0, self.sliding_window
        return self.rope_base, self.freq_scale, None

    @classmethod
    def from_reader(cls, reader: "gguf.GGUFReader") -> "LlamaConfig":
        arch = field_value(reader, "general.architecture")
        if arch not in ARCH_TRAITS:
            raise ValueError(f"general.architecture is {arch!r}, expected one of {sorted(ARCH_TRAITS)}")
        p = arch + "."
        n_embd = int(field_value(reader, p + "embedding_length"))
        n_head = int(field_value(reader, p + "attention.head_count"))
        n_head_kv = int(field_value(reader, p + "attention.head_count_kv", n_head))
        head_dim = int(field_value(reader, p + "attention.key_length", n_embd // n_head))
        window = field_value(reader, p + "attention.sliding_window")
        freq_scale = 1.0
        scaling = field_value(reader, p + "rope.scaling.type")
        factor = field_value(reader, p + "rope.scaling.factor")
        legacy = field_value(reader, p + "rope.scale_linear")
        if scaling in (None, "none"):
            if legacy is not None and float(legacy) != 0.0:
                freq_scale = 1.0 / float(legacy)
        elif scaling == "linear":
            if factor is not None and float(factor) != 0.0:
                freq_scale = 1.0 / float(factor)
        elif scaling == "yarn":
            freq_scale = 1.0 / float(factor)
        else:
            raise NotImplementedError(f"rope scaling type {scaling!r} not supported")
        tokens = field_value(reader, "tokenizer.ggml.tokens")
        if tokens is not None:
            n_vocab = len(tokens)
        else:
            n_vocab = int(field_value(reader, p + "vocab_size"))
        add_bos = field_value(reader, "tokenizer.ggml.add_bos_token")
        bos = field_value(reader, "tokenizer.ggml.bos_token_id")
        eos = field_value(reader, "tokenizer.ggml.eos_token_id")
        n_ff = int(field_value(reader, p + "feed_forward_length", 0))
        n_expert = int(field_value(reader, p + "expert_count", 0))
        n_expert_used = int(field_value(reader, p + "expert_used_count", 0))
        n_ff_exp = int(field_value(reader, p + "expert_feed_forward_length",
                                   n_ff // max(n_expert_used, 1)))
        if ARCH_TRAITS[arch]["moe"] and not 0 < n_expert_used <= n_expert:
            raise ValueError(f"{n_expert_used} experts used of {n_expert}")
        recurrent = None
        n_layer = int(field_value(reader, p + "block_count"))
        if ARCH_TRAITS[arch].get("hybrid"):
            import hybrid_ref
            recurrent = hybrid_ref.RecurrentConfig.from_fields(lambda k, d: field_value(reader, k, d), p)
            n_layer -= int(field_value(reader, p + "nextn_predict_layers", 0))
        yarn_orig = None
        if scaling == "yarn":
            yarn_orig = int(field_value(reader, p + "rope.scaling.original_context_length",
                                        field_value(reader, p + "context_length")))
        return cls(
            arch=arch,
            recurrent=recurrent,
            yarn_orig_ctx=yarn_orig,
            yarn_attn_factor=float(field_value(reader, p + "rope.scaling.attn_factor", 1.0)),
            n_expert=n_expert,
            n_expert_used=n_expert_used,
            n_ff_exp=n_ff_exp,
            head_dim=head_dim,
            sliding_window=None if window is None else int(window),
            n_embd=n_embd,
            n_layer=n_layer,
            n_head=n_head,
            n_head_kv=n_head_kv,
            n_ff=n_ff,
            eps=float(field_value(reader, p + "attention.layer_norm_rms_epsilon")),
            rope_base=float(field_value(reader, p + "rope.freq_base", 10000.0)),
            rope_dims=int(field_value(reader, p + "rope.dimension_count", head_dim)),
            freq_scale=freq_scale,
            n_ctx_train=int(field_value(reader, p + "context_length", 0)),
            n_vocab=n_vocab,
            bos_id=None if bos is None else int(bos),
            eos_id=None if eos is None else int(eos),
            add_bos=None if add_bos is None else bool(add_bos),
        )


# --------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------

@dataclass
class Layer:
    attn_norm: np.ndarray
    wq: np.ndarray  # (n_head*head_dim, n_embd)
    wk: np.ndarray  # (n_head_kv*head_dim, n_embd)
    wv: np.ndarray  # (n_head_kv*head_dim, n_embd)
    wo: np.ndarray  # (n_embd, n_head*head_dim)
    ffn_norm: np.ndarray
    w_gate: np.ndarray | None  # (n_ff, n_embd); (n_expert, n_ff_exp, n_embd) with experts
    w_up: np.ndarray | None  # as w_gate
    w_down: np.ndarray | None  # (n_embd, n_ff); (n_expert, n_embd, n_ff_exp) with experts
    router: np.ndarray | None = None  # (n_expert, n_embd)
    router_b: np.ndarray | None = None  # (n_expert,) gpt-oss
    b_gate: np.ndarray | None = None  # (n_expert, n_ff_exp) gpt-oss
    b_up: np.ndarray | None = None
    b_down: np.ndarray | None = None  # (n_expert, n_embd)
    bo: np.ndarray | None = None  # (n_embd,) gpt-oss
    sinks: np.ndarray | None = None  # (n_head,) gpt-oss
    bq: np.ndarray | None = None  # qwen2
    bk: np.ndarray | None = None
    bv: np.ndarray | None = None
    q_norm: np.ndarray | None = None  # (head_dim,) qwen3, gemma3
    k_norm: np.ndarray | None = None
    post_attn_norm: np.ndarray | None = None  # gemma3
    post_ffw_norm: np.ndarray | None = None
    recurrent: Any = None  # hybrid_ref.RecurrentLayer (qwen35 recurrent layers)
    shexp: tuple | None = None  # qwen35moe: (gate_inp, gate, up, down) of the shared expert


class LlamaModel:
    """Weights of a llama GGUF, dequantized once, and a full-sequence forward."""

    def __init__(self, path: str | Path, dtype: Any = np.float64):
        self.path = str(path)
        self.dtype = np.dtype(dtype)
        reader = gguf.GGUFReader(self.path)
        self.reader = reader
        self.cfg = cfg = LlamaConfig.from_reader(reader)
        by_name = {t.name: t for t in reader.tensors}
        names = set(by_name)

        def get(name: str) -> np.ndarray:
            if name not in by_name:
                raise KeyError(f"tensor {name!r} missing from {self.path}")
            return load_tensor(by_name[name]).astype(self.dtype, copy=False)

        self.tok_embd = get("token_embd.weight")
        if self.tok_embd.shape != (cfg.n_vocab, cfg.n_embd):
            raise ValueError(f"token_embd.weight shape {self.tok_embd.shape}")
        self.output_norm = get("output_norm.weight")
        self.tied_output = "output.weight" not in names
        self.output = self.tok_embd if self.tied_output else get("output.weight")
        self.rope_freq_factors = (
            get("rope_freqs.weight") if "rope_freqs.weight" in names else None
        )
        hd = cfg.head_dim
        self.layers: list[Layer] = []
        for i in range(cfg.n_layer):
            b = f"blk.{i}."
            tr = cfg.traits
            recurrent = cfg.recurrent is not None and cfg.recurrent.is_recurrent(i)
            attn = (lambda name: None) if recurrent else get
            layer = Layer(
                attn_norm=get(b + "attn_norm.weight"),
                wq=attn(b + "attn_q.weight"),
                wk=attn(b + "attn_k.weight"),
                wv=attn(b + "attn_v.weight"),
                wo=attn(b + "attn_output.weight"),
                ffn_norm=get(b + ("post_attention_norm.weight" if tr["gptoss"] or tr.get("hybrid") else "ffn_norm.weight")),
                w_gate=None,
                w_up=None,
                w_down=None,
            )
            if recurrent:
                import hybrid_ref
                layer.recurrent = hybrid_ref.load_layer(get, b)
            if tr.get("hybrid") and tr["moe"]:
                layer.shexp = tuple(get(b + n + ".weight") for n in
                                    ("ffn_gate_inp_shexp", "ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp"))
            if tr["gptoss"]:
                layer.bo = get(b + "attn_output.bias")
                layer.sinks = get(b + "attn_sinks.weight")
                layer.router_b = get(b + "ffn_gate_inp.bias")
                layer.b_gate = get(b + "ffn_gate_exps.bias")
                layer.b_up = get(b + "ffn_up_exps.bias")
                layer.b_down = get(b + "ffn_down_exps.bias")
            if tr["moe"]:
                layer.router = get(b + "ffn_gate_inp.weight")
                layer.w_gate = get(b + "ffn_gate_exps.weight")
                layer.w_up = get(b + "ffn_up_exps.weight")
                layer.w_down = get(b + "ffn_down_exps.weight")
                e, f = cfg.n_expert, cfg.n_ff_exp
                assert layer.router.shape == (e, cfg.n_embd), layer.router.shape
                assert layer.w_gate.shape == (e, f, cfg.n_embd), layer.w_gate.shape
                assert layer.w_up.shape == (e, f, cfg.n_embd), layer.w_up.shape
                assert layer.w_down.shape == (e, cfg.n_embd, f), layer.w_down.shape
            else:
                layer.w_gate = get(b + "ffn_gate.weight")
                layer.w_up = get(b + "ffn_up.weight")
                layer.w_down = get(b + "ffn_down.weight")
                assert layer.w_gate.shape == (cfg.n_ff, cfg.n_embd), layer.w_gate.shape
                assert layer.w_up.shape == (cfg.n_ff, cfg.n_embd), layer.w_up.shape
                assert layer.w_down.shape == (cfg.n_embd, cfg.n_ff), layer.w_down.shape
            if tr["qkv_bias"]:
                layer.bq = get(b + "attn_q.bias")
                layer.bk = get(b + "attn_k.bias")
                layer.bv = get(b + "attn_v.bias")
            if recurrent:
                self.layers.append(layer)
                continue
            if tr["qk_norm"]:
                layer.q_norm = get(b + "attn_q_norm.weight")
                layer.k_norm = get(b + "attn_k_norm.weight")
                assert layer.q_norm.shape == (hd,), layer.q_norm.shape
            if tr["post_norms"]:
                layer.post_attn_norm = get(b + "post_attention_norm.weight")
                layer.post_ffw_norm = get(b + "post_ffw_norm.weight")
            q_rows = (2 if tr.get("hybrid") else 1) * cfg.n_head * hd  # with the output gate
            assert layer.wq.shape == (q_rows, cfg.n_embd), layer.wq.shape
            assert layer.wk.shape == (cfg.n_head_kv * hd, cfg.n_embd), layer.wk.shape
            assert layer.wv.shape == (cfg.n_head_kv * hd, cfg.n_embd), layer.wv.shape
            assert layer.wo.shape == (cfg.n_embd, cfg.n_head * hd), layer.wo.shape
            self.layers.append(layer)
        self._rope_cache: dict[tuple[int, float, float], tuple[np.ndarray, np.ndarray]] = {}

    # -- building blocks ---------------------------------------------------

    def rms_norm(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        ms = np.mean(x * x, axis=-1, keepdims=True)
        return x / np.sqrt(ms + self.cfg.eps) * w

    def rope_tables(self, n_pos: int, base: float, scale: float) -> tuple[np.ndarray, np.ndarray]:
        """cos/sin of shape (n_pos, rope_dims/2) for positions 0..n_pos-1."""
        key = (n_pos, base, scale)
        cached = self._rope_cache.get(key)
        if cached is not None:
            return cached
        cfg = self.cfg
        i = np.arange(cfg.rope_dims // 2, dtype=np.float64)
        inv_freq = base ** (-2.0 * i / cfg.rope_dims)
        if self.rope_freq_factors is not None:
            inv_freq = inv_freq / self.rope_freq_factors.astype(np.float64)[: len(i)]
        if cfg.yarn_orig_ctx is not None:
            # ggml's rope_yarn with ext_factor 1, beta_fast 32, beta_slow 1.
            dims = cfg.rope_dims
            def corr(rot):
                return dims * math.log(cfg.yarn_orig_ctx / (rot * 2 * math.pi)) / (2 * math.log(base))
            low = max(0.0, math.floor(corr(32.0)))
            high = min(dims - 1.0, math.ceil(corr(1.0)))
            mix = 1.0 - np.clip((i - low) / max(0.001, high - low), 0.0, 1.0)
            extrap = np.arange(n_pos, dtype=np.float64)[:, None] * inv_freq[None, :]
            theta = extrap * scale * (1.0 - mix) + extrap * mix
            mscale = cfg.yarn_attn_factor * (1.0 + 0.1 * math.log(1.0 / scale))
            tables = ((np.cos(theta) * mscale).astype(self.dtype), (np.sin(theta) * mscale).astype(self.dtype))
            self._rope_cache[key] = tables
            return tables
        pos = np.arange(n_pos, dtype=np.float64) * scale
        theta = pos[:, None] * inv_freq[None, :]
        tables = (np.cos(theta).astype(self.dtype), np.sin(theta).astype(self.dtype))
        self._rope_cache[key] = tables
        return tables

    def rope(self, x: np.ndarray, base: float, scale: float) -> np.ndarray:
        """ggml rope on x of shape (T, heads, head_dim): adjacent pairs
        (2i, 2i+1) in normal mode, (i, i + rope_dims/2) in NeoX mode."""
        t = x.shape[0]
        cos, sin = self.rope_tables(t, base, scale)
        cos = cos[:, None, :]
        sin = sin[:, None, :]
        nd = self.cfg.rope_dims
        out = x.copy()
        if self.cfg.traits["neox"]:
            first, second = slice(0, nd // 2), slice(nd // 2, nd)
        else:
            first, second = slice(0, nd, 2), slice(1, nd, 2)
        x0 = x[:, :, first]
        x1 = x[:, :, second]
        out[:, :, first] = x0 * cos - x1 * sin
        out[:, :, second] = x0 * sin + x1 * cos
        return out

    def attention(self, x: np.ndarray, layer: Layer, il: int) -> np.ndarray:
        cfg = self.cfg
        t = x.shape[0]
        hd = cfg.head_dim
        base, scale, window = cfg.layer_rope(il)
        q = x @ layer.wq.T
        k = x @ layer.wk.T
        v = x @ layer.wv.T
        if layer.bq is not None:
            q, k, v = q + layer.bq, k + layer.bk, v + layer.bv
        gate = None
        if cfg.traits.get("hybrid"):
            # [q | gate] per head.
            both = q.reshape(t, cfg.n_head, 2 * hd)
            q, gate = both[:, :, :hd], both[:, :, hd:].reshape(t, cfg.n_head * hd)
        q = q.reshape(t, cfg.n_head, hd)
        k = k.reshape(t, cfg.n_head_kv, hd)
        v = v.reshape(t, cfg.n_head_kv, hd)
        if layer.q_norm is not None:
            q = self.rms_norm(q, layer.q_norm)
            k = self.rms_norm(k, layer.k_norm)
        q = self.rope(q, base, scale)
        k = self.rope(k, base, scale)
        group = cfg.n_head // cfg.n_head_kv
        # query head h uses kv head h // group
        k = np.repeat(k, group, axis=1)  # (T, n_head, hd)
        v = np.repeat(v, group, axis=1)
        qh = q.transpose(1, 0, 2)  # (H, T, hd)
        kh = k.transpose(1, 0, 2)
        vh = v.transpose(1, 0, 2)
        # Queries in chunks, so long contexts need O(chunk x T) memory; each
        # row is the same whole-row softmax as in one piece.
        o = np.empty((cfg.n_head, t, hd), dtype=qh.dtype)
        for s in range(0, t, ATTENTION_CHUNK):
            e = min(t, s + ATTENTION_CHUNK)
            scores = (qh[:, s:e] @ kh[:, :e].transpose(0, 2, 1)) * cfg.attn_scale  # (H, e - s, e)
            rows = np.arange(s, e)[:, None]
            cols = np.arange(e)[None, :]
            mask = cols > rows
            if window is not None:
                # query i sees keys j with i - window < j <= i
                mask |= cols <= rows - window
            scores[:, mask] = -np.inf
            if layer.sinks is not None:
                # A key of logit sinks[h] (not scaled) and value zero.
                sink = layer.sinks.astype(scores.dtype)[:, None, None]
                top = np.maximum(scores.max(axis=-1, keepdims=True), sink)
                p = np.exp(scores - top)
                p /= p.sum(axis=-1, keepdims=True) + np.exp(sink - top)
            else:
                scores -= scores.max(axis=-1, keepdims=True)
                p = np.exp(scores)
                p /= p.sum(axis=-1, keepdims=True)
            o[:, s:e] = p @ vh[:, :e]
        o = o.transpose(1, 0, 2).reshape(t, cfg.n_head * hd)
        if gate is not None:
            o = o / (1.0 + np.exp(-gate))
        out = o @ layer.wo.T
        if layer.bo is not None:
            out = out + layer.bo
        return out

    def moe(self, x: np.ndarray, layer: Layer) -> np.ndarray:
        """Mixture of experts on rows x (T, n_embd)."""
        k = self.cfg.n_expert_used
        scores = x @ layer.router.T
        if layer.router_b is not None:
            scores = scores + layer.router_b
        probs = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probs /= probs.sum(axis=-1, keepdims=True)
        out = np.zeros_like(x)
        gptoss = self.cfg.traits["gptoss"]
        for t in range(x.shape[0]):
            # The most probable first; a stable sort keeps ties by index.
            chosen = np.argsort(-probs[t], kind="stable")[:k]
            # qwen3moe: probabilities renormalised over the chosen;
            # gpt-oss: softmax of the chosen logits (the same values).
            weights = probs[t, chosen] / probs[t, chosen].sum()
            for e, w in zip(chosen, weights):
                g = layer.w_gate[e] @ x[t]
                u = layer.w_up[e] @ x[t]
                if gptoss:
                    g = np.minimum(g + layer.b_gate[e], 7.0)
                    u = np.clip(u + layer.b_up[e], -7.0, 7.0)
                    a = g / (1.0 + np.exp(-1.702 * g)) * (u + 1.0)
                    out[t] += w * (layer.w_down[e] @ a + layer.b_down[e])
                else:
                    out[t] += w * (layer.w_down[e] @ (g / (1.0 + np.exp(-g)) * u))
        if layer.shexp is not None:
            gate_inp, w_g, w_u, w_d = layer.shexp
            g, u = x @ w_g.T, x @ w_u.T
            shared = (g / (1.0 + np.exp(-g)) * u) @ w_d.T
            out += shared / (1.0 + np.exp(-(x @ gate_inp)))[:, None]
        return out

    def ffn(self, x: np.ndarray, layer: Layer) -> np.ndarray:
        if layer.router is not None:
            return self.moe(x, layer)
        g = x @ layer.w_gate.T
        u = x @ layer.w_up.T
        if self.cfg.traits["gelu"]:
            a = 0.5 * g * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (g + 0.044715 * g ** 3)))
        else:
            a = g / (1.0 + np.exp(-g))
        return (a * u) @ layer.w_down.T

    # -- forward -----------------------------------------------------------

    def forward(self, tokens: Sequence[int], last: int | None = None) -> np.ndarray:
        """Logits (T or `last` rows, n_vocab) for tokens at positions 0..T-1."""
        ids = np.asarray(tokens, dtype=np.int64)
        if ids.ndim != 1 or ids.size == 0:
            raise ValueError("need a non-empty list of token ids")
        if ids.min() < 0 or ids.max() >= self.cfg.n_vocab:
            raise ValueError("token id out of range")
        x = self.tok_embd[ids]
        if self.cfg.traits["embd_scale"]:
            x = x * math.sqrt(self.cfg.n_embd)
        with np.errstate(over="ignore"):  # exp(-g) may overflow to inf: silu -> 0
            for il, layer in enumerate(self.layers):
                if layer.recurrent is not None:
                    import hybrid_ref
                    h = self.rms_norm(x, layer.attn_norm)
                    a = hybrid_ref.forward(h, layer.recurrent, self.cfg.recurrent, self.cfg.eps)
                else:
                    a = self.attention(self.rms_norm(x, layer.attn_norm), layer, il)
                if layer.post_attn_norm is not None:
                    a = self.rms_norm(a, layer.post_attn_norm)
                x = x + a
                f = self.ffn(self.rms_norm(x, layer.ffn_norm), layer)
                if layer.post_ffw_norm is not None:
                    f = self.rms_norm(f, layer.post_ffw_norm)
                x = x + f
        if last is not None:
            x = x[-last:]
        x = self.rms_norm(x, self.output_norm)
        return x @ self.output.T


def log_softmax(logits: np.ndarray) -> np.ndarray:
    z = logits.astype(np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


# --------------------------------------------------------------------------
# Perplexity (llama-perplexity semantics, see module docstring)
# --------------------------------------------------------------------------

def perplexity(model: LlamaModel, tokens: Sequence[int], ctx: int,
               chunks: int | None = None, add_bos: bool = False,
               log=None) -> dict:
    tokens = list(tokens)
    if ctx < 2:
        raise ValueError("ctx must be at least 2")
    if len(tokens) < 2 * ctx and log:
        log(f"warning: llama-perplexity needs at least {2 * ctx} tokens, have {len(tokens)}")
    n_chunk = len(tokens) // ctx
    if chunks is not None and chunks >= 0:
        n_chunk = min(n_chunk, chunks)
    if n_chunk == 0:
        raise ValueError(f"fewer than ctx={ctx} tokens ({len(tokens)})")
    if add_bos and model.cfg.bos_id is None:
        raise ValueError("add_bos requested but the model has no BOS id")
    first = ctx // 2
    nll = 0.0
    count = 0
    per_chunk = []
    times = []
    for c in range(n_chunk):
        chunk = tokens[c * ctx:(c + 1) * ctx]
        inp = list(chunk)
        if add_bos:
            inp[0] = model.cfg.bos_id
        t0 = time.perf_counter()
        logits = model.forward(inp)
        times.append(time.perf_counter() - t0)
        lp = log_softmax(logits[first:ctx - 1])  # positions first..ctx-2
        targets = np.asarray(chunk[first + 1:ctx], dtype=np.int64)
        chunk_nll = -lp[np.arange(len(targets)), targets]
        nll += float(chunk_nll.sum())
        count += len(targets)
        per_chunk.append(math.exp(nll / count))
        if log:
            log(f"[{c + 1}/{n_chunk}] running ppl {per_chunk[-1]:.4f} ({times[-1]:.2f} s)")
    return {
        "ppl": math.exp(nll / count),
        "nll_mean": nll / count,
        "chunks": n_chunk,
        "ctx": ctx,
        "tokens_scored": count,
        "add_bos": add_bos,
        "running_ppl": per_chunk,
        "seconds_per_chunk": sum(times) / len(times),
    }


# --------------------------------------------------------------------------
# Tokenizer (only for `generate` and `perplexity --text-file`)
# --------------------------------------------------------------------------

def build_tokenizer(reader: "gguf.GGUFReader"):
    """A HF `tokenizers` BPE tokenizer from a GGUF 'gpt2' vocabulary.

    Pre-tokenizer: individual digits, then GPT-2 byte-level regex split (no
    prefix space) -- what SmolLM2 ('smollm' pre-type) uses.  Control tokens
    (token_type 3) and user-defined ones (4) are registered as special tokens
    so that chat-template markers like <|im_start|> map to single ids.
    """
    import tokenizers
    from tokenizers import AddedToken, decoders, models, pre_tokenizers

    model_type = field_value(reader, "tokenizer.ggml.model")
    if model_type != "gpt2":
        raise NotImplementedError(f"tokenizer.ggml.model {model_type!r} not supported here")
    toks = field_value(reader, "tokenizer.ggml.tokens")
    merges = field_value(reader, "tokenizer.ggml.merges")
    types = field_value(reader, "tokenizer.ggml.token_type")
    vocab = {t: i for i, t in enumerate(toks)}
    merge_pairs = [tuple(m.split(" ", 1)) for m in merges]
    tok = tokenizers.Tokenizer(models.BPE(vocab, merge_pairs))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False),
    ])
    tok.decoder = decoders.ByteLevel()
    if types is not None:
        special = [toks[i] for i, ty in enumerate(types) if int(ty) in (3, 4)]
        tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in special])
    return tok


def tokenize_text(model: LlamaModel, text: str, add_bos: bool) -> list[int]:
    tok = build_tokenizer(model.reader)
    ids = tok.encode(text, add_special_tokens=False).ids
    if add_bos:
        ids = [model.cfg.bos_id] + ids
    return ids


def generate(model: LlamaModel, prompt_ids: Sequence[int], n: int,
             stop_at_eos: bool = True) -> list[int]:
    """Greedy (argmax) continuation; full recompute each step."""
    ids = list(prompt_ids)
    out: list[int] = []
    for _ in range(n):
        logits = model.forward(ids, last=1)[0]
        nxt = int(np.argmax(logits))
        out.append(nxt)
        ids.append(nxt)
        if stop_at_eos and nxt == model.cfg.eos_id:
            break
    return out


# --------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------

def parse_ids(s: str) -> list[int]:
    return [int(x) for x in s.replace(" ", "").split(",") if x != ""]


def resolve_add_bos(args, cfg: LlamaConfig) -> bool:
    if args.add_bos is not None:
        return args.add_bos
    return bool(cfg.add_bos)


def eprint(*a):
    print(*a, file=sys.stderr, flush=True)


def load_model(path: str | Path, dtype: Any) -> Any:
    """The model of a GGUF file: gemma4's own (gemma4_ref.py), else LlamaModel."""
    reader = gguf.GGUFReader(str(path))
    if field_value(reader, "general.architecture") == "gemma4":
        import gemma4_ref
        return gemma4_ref.Gemma4Model(path, dtype, field_value, load_tensor)
    return LlamaModel(path, dtype=dtype)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p):
        p.add_argument("model", help="GGUF file (general.architecture = llama)")
        p.add_argument("--dtype", choices=["float64", "float32"], default="float64",
                       help="compute precision (default float64)")

    def bos_flags(p):
        g = p.add_mutually_exclusive_group()
        g.add_argument("--add-bos", dest="add_bos", action="store_true", default=None,
                       help="force BOS handling on (default: tokenizer.ggml.add_bos_token)")
        g.add_argument("--no-add-bos", dest="add_bos", action="store_false")

    p = sub.add_parser("logits", help="logits for a token list")
    common(p)
    p.add_argument("--tokens", required=True, help="comma-separated token ids")
    p.add_argument("--last", type=int, default=None, help="only the last K positions")
    p.add_argument("--out", default=None, help="output .json or .npy (default: JSON on stdout)")

    p = sub.add_parser("perplexity", help="llama-perplexity style perplexity")
    common(p)
    bos_flags(p)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--tokens-file", help="JSON list of token ids (or {'tokens': [...]})")
    src.add_argument("--text-file", help="text to tokenize with the built-in BPE tokenizer")
    p.add_argument("--ctx", type=int, required=True)
    p.add_argument("--chunks", type=int, default=None, help="at most N chunks")

    p = sub.add_parser("generate", help="greedy continuation")
    common(p)
    bos_flags(p)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", help="text prompt (tokenized with the built-in tokenizer)")
    src.add_argument("--tokens", help="comma-separated prompt token ids")
    p.add_argument("--n", type=int, default=20, help="tokens to generate (default 20)")
    p.add_argument("--no-stop", action="store_true", help="do not stop at EOS")

    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    model = load_model(args.model, np.float64 if args.dtype == "float64" else np.float32)
    eprint(f"loaded {args.model} in {time.perf_counter() - t0:.1f} s "
           f"(tied output: {model.tied_output}, dtype {model.dtype})")
    cfg = model.cfg

    if args.cmd == "logits":
        ids = parse_ids(args.tokens)
        last = args.last if args.last and args.last < len(ids) else None
        logits = model.forward(ids, last=last)
        start = len(ids) - logits.shape[0]
        if args.out and args.out.endswith(".npy"):
            np.save(args.out, logits.astype(np.float32))
        else:
            doc = {
                "n_vocab": cfg.n_vocab,
                "tokens": ids,
                "positions": list(range(start, len(ids))),
                "dtype": str(model.dtype),
                "logits": [[float(v) for v in row] for row in logits],
            }
            text = json.dumps(doc)
            if args.out:
                Path(args.out).write_text(text)
            else:
                print(text)
        if args.out:
            eprint(f"wrote {logits.shape[0]} x {logits.shape[1]} logits to {args.out}")
        return 0

    if args.cmd == "perplexity":
        add_bos = resolve_add_bos(args, cfg)
        if args.tokens_file:
            doc = json.loads(Path(args.tokens_file).read_text())
            ids = doc["tokens"] if isinstance(doc, dict) else doc
            ids = [int(x) for x in ids]
        else:
            ids = tokenize_text(model, Path(args.text_file).read_text(), add_bos)
            eprint(f"tokenized {args.text_file}: {len(ids)} tokens")
        res = perplexity(model, ids, args.ctx, args.chunks, add_bos=add_bos, log=eprint)
        res["dtype"] = str(model.dtype)
        print(json.dumps(res))
        return 0

    if args.cmd == "generate":
        add_bos = resolve_add_bos(args, cfg)
        tok = None
        if args.prompt is not None:
            tok = build_tokenizer(model.reader)
            ids = tok.encode(args.prompt, add_special_tokens=False).ids
            if add_bos:
                ids = [cfg.bos_id] + ids
        else:
            ids = parse_ids(args.tokens)
            try:
                tok = build_tokenizer(model.reader)
            except Exception:  # decoding is a nicety only
                tok = None
        t1 = time.perf_counter()
        out = generate(model, ids, args.n, stop_at_eos=not args.no_stop)
        dt = time.perf_counter() - t1
        res = {"prompt_tokens": ids, "generated_tokens": out, "seconds": round(dt, 2)}
        if tok is not None:
            res["prompt_text"] = tok.decode(ids, skip_special_tokens=False)
            res["generated_text"] = tok.decode(out, skip_special_tokens=False)
        print(json.dumps(res, ensure_ascii=False))
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
