"""Gemma 4 (``general.architecture = gemma4``: the dense 31B, the 26B-A4B
mixture of experts and the small E2B/E4B) for the NumPy reference
``llama_ref.py``, as llama.cpp computes it (``src/models/gemma4*.cpp``; the
facts are in docs/hybrid-facts.md section 4).  Nothing here is shared with
the Rust code.  Float64 end to end on the dequantized weights.

* ``x = token_embd[t] * sqrt(n_embd)``.
* Per-layer embeddings (``embedding_length_per_layer_input`` > 0):
  ``own = per_layer_token_embd[t] * sqrt(n_pl)`` as (n_layer, n_pl);
  ``proj = rms_norm(per_layer_model_proj x / sqrt(n_embd)) * per_layer_proj_norm``
  per layer; ``ple = (proj + own) / sqrt(2)``.
* Layer il: sliding (``attention.sliding_window_pattern``) or full, each
  with its own head size (``key_length_swa`` / ``key_length``), KV heads
  (``head_count_kv[il]``), RoPE (NeoX; sliding: ``rope.freq_base_swa`` over
  ``rope.dimension_count_swa``; full: ``rope.freq_base`` over
  ``rope.dimension_count`` with ``theta_i`` divided by ``rope_freqs[i]``).
  ``q = rope(rms_norm(Wq h) * q_norm)``; a layer with keys and values of
  its own (il < n_layer - shared_kv_layers): ``k = rope(rms_norm(Wk h) *
  k_norm)``, ``v = rms_norm(Wv h)`` (no weight; ``Wv = Wk`` without
  ``attn_v``); the others use layer ``kv_from - 2`` (sliding) or
  ``kv_from - 1`` (full)'s.  Scores are not scaled; a sliding layer sees
  keys ``p1 - p0 < sliding_window``.
* ``x += rms_norm(Wo a) * post_attention_norm``; the FFN: ``n1 =
  rms_norm(x) * ffn_norm``, ``f = W_down(gelu(W_gate n1) * W_up n1)``; with
  experts, ``f = rms_norm(f) * post_ffw_norm_1 + rms_norm(moe) *
  post_ffw_norm_2`` where the router scores ``rms_norm(x) / sqrt(n_embd) *
  ffn_gate_inp.scale``, softmax over all, the top k renormalised, each
  expert ``down(gelu(gate n2) * up n2) * ffn_down_exps.scale[e]`` on ``n2 =
  rms_norm(x) * pre_ffw_norm_2`` (gate and up: the halves of
  ``ffn_gate_up_exps``, gate first); ``x += rms_norm(f) * post_ffw_norm``.
* Per-layer embedding: ``x += rms_norm(proj (gelu(inp_gate x) * ple[il])) *
  post_norm``; then ``x *= layer_output_scale``.
* ``logits = output(rms_norm(x) * output_norm)``, then ``c tanh(logits / c)``
  (``final_logit_softcapping``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

import gguf


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


@dataclass
class Gemma4Config:
    """What the generic tools of llama_ref.py read, and Gemma 4's own."""
    n_embd: int
    n_layer: int
    n_head: int
    n_vocab: int
    eps: float
    sliding: list[bool]
    kv_heads: list[int]
    head_dim: int
    swa_head_dim: int
    rope_dims: int
    swa_rope_dims: int
    rope_base: float
    swa_rope_base: float
    window: int
    kv_from: int
    n_pl: int
    softcap: float | None
    n_expert: int
    n_expert_used: int
    bos_id: int | None
    eos_id: int | None
    add_bos: bool | None
    arch: str = "gemma4"


class Gemma4Model:
    """Weights of a gemma4 GGUF, dequantized once, and a full-sequence forward."""

    def __init__(self, path: str | Path, dtype: Any, field_value, load_tensor):
        self.path = str(path)
        self.dtype = np.dtype(dtype)
        reader = gguf.GGUFReader(self.path)
        self.reader = reader
        p = "gemma4."

        def fv(key, default=None):
            return field_value(reader, p + key, default)

        n_layer = int(fv("block_count"))
        pattern = fv("attention.sliding_window_pattern")
        if isinstance(pattern, list):
            sliding = [bool(b) for b in pattern[:n_layer]]
        else:
            sliding = [(il + 1) % int(pattern) != 0 for il in range(n_layer)]
        kvh = fv("attention.head_count_kv")
        kv_heads = [int(h) for h in kvh[:n_layer]] if isinstance(kvh, list) else [int(kvh)] * n_layer
        head_dim = int(fv("attention.key_length"))
        swa_head_dim = int(fv("attention.key_length_swa"))
        softcap = fv("final_logit_softcapping")
        tokens = field_value(reader, "tokenizer.ggml.tokens")
        add_bos = field_value(reader, "tokenizer.ggml.add_bos_token")
        bos = field_value(reader, "tokenizer.ggml.bos_token_id")
        eos = field_value(reader, "tokenizer.ggml.eos_token_id")
        self.cfg = cfg = Gemma4Config(
            n_embd=int(fv("embedding_length")),
            n_layer=n_layer,
            n_head=int(fv("attention.head_count")),
            n_vocab=len(tokens) if tokens is not None else int(fv("vocab_size")),
            eps=float(fv("attention.layer_norm_rms_epsilon")),
            sliding=sliding,
            kv_heads=kv_heads,
            head_dim=head_dim,
            swa_head_dim=swa_head_dim,
            rope_dims=int(fv("rope.dimension_count", head_dim)),
            swa_rope_dims=int(fv("rope.dimension_count_swa", swa_head_dim)),
            rope_base=float(fv("rope.freq_base", 10000.0)),
            swa_rope_base=float(fv("rope.freq_base_swa", 10000.0)),
            window=int(fv("attention.sliding_window")),
            kv_from=n_layer - int(fv("attention.shared_kv_layers", 0)),
            n_pl=int(fv("embedding_length_per_layer_input", 0)),
            softcap=None if not softcap else float(softcap),
            n_expert=int(fv("expert_count", 0)),
            n_expert_used=int(fv("expert_used_count", 0)),
            bos_id=None if bos is None else int(bos),
            eos_id=None if eos is None else int(eos),
            add_bos=None if add_bos is None else bool(add_bos),
        )
        by_name = {t.name: t for t in reader.tensors}
        self.names = set(by_name)

        def get(name: str) -> np.ndarray:
            if name not in by_name:
                raise KeyError(f"tensor {name!r} missing from {self.path}")
            return load_tensor(by_name[name]).astype(self.dtype, copy=False)

        self.get = get
        self.tok_embd = get("token_embd.weight")
        self.output_norm = get("output_norm.weight")
        self.tied_output = "output.weight" not in self.names
        self.output = self.tok_embd if self.tied_output else get("output.weight")
        self.rope_freqs = get("rope_freqs.weight").astype(np.float64) if "rope_freqs.weight" in self.names else None
        self.layers = [self._layer(il) for il in range(cfg.n_layer)]

    def _layer(self, il: int) -> dict[str, np.ndarray]:
        b = f"blk.{il}."
        layer = {}
        for name in sorted(n for n in self.names if n.startswith(b)):
            layer[name[len(b):]] = self.get(name)
        return layer

    # -- building blocks ---------------------------------------------------

    def rms(self, x: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
        y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.cfg.eps)
        return y if w is None else y * w

    def rope(self, x: np.ndarray, sliding: bool) -> np.ndarray:
        """NeoX rope of x (T, heads, hd): pairs (i, i + dims/2)."""
        cfg = self.cfg
        dims, base = (cfg.swa_rope_dims, cfg.swa_rope_base) if sliding else (cfg.rope_dims, cfg.rope_base)
        i = np.arange(dims // 2, dtype=np.float64)
        inv = base ** (-2.0 * i / dims)
        if not sliding and self.rope_freqs is not None:
            inv = inv / self.rope_freqs[: dims // 2]
        theta = np.arange(x.shape[0], dtype=np.float64)[:, None] * inv[None, :]
        cos, sin = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
        out = x.copy()
        a, b = x[:, :, : dims // 2], x[:, :, dims // 2: dims]
        out[:, :, : dims // 2] = a * cos - b * sin
        out[:, :, dims // 2: dims] = a * sin + b * cos
        return out

    def attend(self, q: np.ndarray, k: np.ndarray, v: np.ndarray, window: int | None) -> np.ndarray:
        t, heads, hd = q.shape
        group = heads // k.shape[1]
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
        scores = np.einsum("thd,shd->hts", q, k)  # not scaled
        rows, cols = np.arange(t)[:, None], np.arange(t)[None, :]
        mask = cols > rows
        if window is not None:
            mask |= rows - cols >= window
        scores[:, mask] = -np.inf
        scores -= scores.max(axis=-1, keepdims=True)
        p = np.exp(scores)
        p /= p.sum(axis=-1, keepdims=True)
        return np.einsum("hts,shd->thd", p, v).reshape(t, heads * hd)

    def moe(self, x: np.ndarray, n2: np.ndarray, layer: dict[str, np.ndarray]) -> np.ndarray:
        cfg = self.cfg
        r = self.rms(x) / math.sqrt(cfg.n_embd) * layer["ffn_gate_inp.scale"]
        scores = r @ layer["ffn_gate_inp.weight"].T
        probs = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probs /= probs.sum(axis=-1, keepdims=True)
        gate_up, down = layer["ffn_gate_up_exps.weight"], layer["ffn_down_exps.weight"]
        scale = layer.get("ffn_down_exps.scale")
        f = gate_up.shape[1] // 2
        out = np.zeros_like(x)
        for t in range(x.shape[0]):
            chosen = np.argsort(-probs[t], kind="stable")[: cfg.n_expert_used]
            weights = probs[t, chosen] / probs[t, chosen].sum()
            for e, w in zip(chosen, weights):
                both = gate_up[e] @ n2[t]
                y = down[e] @ (_gelu(both[:f]) * both[f:])
                out[t] += w * (y if scale is None else y * scale[e])
        return out

    # -- forward -----------------------------------------------------------

    def forward(self, tokens: Sequence[int], last: int | None = None) -> np.ndarray:
        cfg = self.cfg
        ids = np.asarray(tokens, dtype=np.int64)
        if ids.ndim != 1 or ids.size == 0 or ids.min() < 0 or ids.max() >= cfg.n_vocab:
            raise ValueError("need a non-empty list of token ids in the vocabulary")
        t = ids.size
        x = self.tok_embd[ids] * math.sqrt(cfg.n_embd)
        ple = None
        if cfg.n_pl > 0:
            own = self.get("per_layer_token_embd.weight")[ids].reshape(t, cfg.n_layer, cfg.n_pl) * math.sqrt(cfg.n_pl)
            proj = (x @ self.get("per_layer_model_proj.weight").T) / math.sqrt(cfg.n_embd)
            proj = self.rms(proj.reshape(t, cfg.n_layer, cfg.n_pl), self.get("per_layer_proj_norm.weight"))
            ple = (proj + own) / math.sqrt(2.0)
        kv: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for il, layer in enumerate(self.layers):
            sliding = cfg.sliding[il]
            hd = cfg.swa_head_dim if sliding else cfg.head_dim
            h = self.rms(x, layer["attn_norm.weight"])
            q = self.rms((h @ layer["attn_q.weight"].T).reshape(t, cfg.n_head, hd), layer["attn_q_norm.weight"])
            q = self.rope(q, sliding)
            if il < cfg.kv_from:
                kraw = h @ layer["attn_k.weight"].T
                vraw = h @ layer["attn_v.weight"].T if "attn_v.weight" in layer else kraw
                k = self.rms(kraw.reshape(t, cfg.kv_heads[il], hd), layer["attn_k_norm.weight"])
                kv[il] = (self.rope(k, sliding), self.rms(vraw.reshape(t, cfg.kv_heads[il], hd)))
            k, v = kv[il if il < cfg.kv_from else cfg.kv_from - (2 if sliding else 1)]
            a = self.attend(q, k, v, cfg.window if sliding else None) @ layer["attn_output.weight"].T
            x = x + self.rms(a, layer["post_attention_norm.weight"])
            n1 = self.rms(x, layer["ffn_norm.weight"])
            f = (_gelu(n1 @ layer["ffn_gate.weight"].T) * (n1 @ layer["ffn_up.weight"].T)) @ layer["ffn_down.weight"].T
            if "ffn_gate_inp.weight" in layer:
                n2 = self.rms(x, layer["pre_ffw_norm_2.weight"])
                moe = self.moe(x, n2, layer)
                f = self.rms(f, layer["post_ffw_norm_1.weight"]) + self.rms(moe, layer["post_ffw_norm_2.weight"])
            x = x + self.rms(f, layer["post_ffw_norm.weight"])
            if ple is not None:
                g = _gelu(x @ layer["inp_gate.weight"].T) * ple[:, il]
                x = x + self.rms(g @ layer["proj.weight"].T, layer["post_norm.weight"])
            if "layer_output_scale.weight" in layer:
                x = x * layer["layer_output_scale.weight"]
        if last is not None:
            x = x[-last:]
        logits = self.rms(x, self.output_norm) @ self.output.T
        if cfg.softcap is not None:
            logits = cfg.softcap * np.tanh(logits / cfg.softcap)
        return logits
