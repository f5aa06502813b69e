"""The recurrent (Gated DeltaNet) layers of Qwen 3.5's hybrid models
(``qwen35``, ``qwen35moe``) for the NumPy reference ``llama_ref.py``, as
llama.cpp computes them (``src/models/qwen35*.cpp`` and
``delta-net-base.cpp``; the facts are in docs/hybrid-facts.md).  Nothing
here is shared with the Rust code.

One recurrent layer on the normalised rows ``x`` (T, n_embd):

* ``qkv = x W_qkv^T`` (T, 2 Hk dk + Hv dv), ``z = x W_gate^T`` (T, Hv dv),
  ``beta = sigmoid(x W_beta^T)`` and ``g = softplus(x W_alpha^T + dt_bias)
  * ssm_a`` (T, Hv), softplus as ggml's (``x > 20 ? x : log(1 + e^x)``);
* a causal convolution of ``qkv`` along time, per channel, by
  ``ssm_conv1d`` (K taps, the last for the current token), from zeros
  before the first token; then SiLU;
* q, k, v split off (head-major), q and k L2-normalised per head
  (``x / max(||x||, eps)``);
* the gated delta rule per value head h (reading key head ``h mod Hk``),
  from a zero state S (dv x dk): ``S *= exp(g_t)``; ``d = (v_t - S k_t)
  beta_t``; ``S += d k_t^T``; ``o_t = (S q_t) / sqrt(dk)``;
* ``o = rms_norm(o) * ssm_norm * silu(z)`` per head, then ``o W_out^T``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np


@dataclass
class RecurrentConfig:
    conv_kernel: int
    head_dim: int
    key_heads: int
    value_heads: int
    interval: int

    @classmethod
    def from_fields(cls, field: Callable[[str, Any], Any], prefix: str) -> "RecurrentConfig":
        return cls(
            conv_kernel=int(field(prefix + "ssm.conv_kernel", None)),
            head_dim=int(field(prefix + "ssm.state_size", None)),
            key_heads=int(field(prefix + "ssm.group_count", None)),
            value_heads=int(field(prefix + "ssm.time_step_rank", None)),
            interval=int(field(prefix + "full_attention_interval", 4)),
        )

    def is_recurrent(self, il: int) -> bool:
        return (il + 1) % self.interval != 0


@dataclass
class RecurrentLayer:
    w_qkv: np.ndarray  # (conv_dim, n_embd)
    w_gate: np.ndarray  # (Hv dv, n_embd)
    conv: np.ndarray  # (conv_dim, K)
    dt_bias: np.ndarray  # (Hv,)
    a: np.ndarray  # (Hv,)
    w_beta: np.ndarray  # (Hv, n_embd)
    w_alpha: np.ndarray  # (Hv, n_embd)
    norm: np.ndarray  # (dv,)
    w_out: np.ndarray  # (n_embd, Hv dv)


def load_layer(get: Callable[[str], np.ndarray], prefix: str) -> RecurrentLayer:
    return RecurrentLayer(
        w_qkv=get(prefix + "attn_qkv.weight"),
        w_gate=get(prefix + "attn_gate.weight"),
        conv=get(prefix + "ssm_conv1d.weight"),
        dt_bias=get(prefix + "ssm_dt.bias"),
        a=get(prefix + "ssm_a"),
        w_beta=get(prefix + "ssm_beta.weight"),
        w_alpha=get(prefix + "ssm_alpha.weight"),
        norm=get(prefix + "ssm_norm.weight"),
        w_out=get(prefix + "ssm_out.weight"),
    )


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def forward(x: np.ndarray, w: RecurrentLayer, cfg: RecurrentConfig, eps: float) -> np.ndarray:
    t = x.shape[0]
    dk, hk, hv = cfg.head_dim, cfg.key_heads, cfg.value_heads
    key_dim = hk * dk
    qkv = x @ w.w_qkv.T
    z = x @ w.w_gate.T
    beta = sigmoid(x @ w.w_beta.T)
    a = x @ w.w_alpha.T + w.dt_bias
    g = np.where(a > 20.0, a, np.log1p(np.exp(np.minimum(a, 20.0)))) * w.a
    k_taps = cfg.conv_kernel
    padded = np.concatenate([np.zeros((k_taps - 1, qkv.shape[1]), dtype=qkv.dtype), qkv])
    conv = np.zeros_like(qkv)
    for i in range(k_taps):
        conv += padded[i:i + t] * w.conv[:, i]
    conv = silu(conv)
    q = conv[:, :key_dim].reshape(t, hk, dk)
    k = conv[:, key_dim:2 * key_dim].reshape(t, hk, dk)
    v = conv[:, 2 * key_dim:].reshape(t, hv, dk)

    def l2(y: np.ndarray) -> np.ndarray:
        return y / np.maximum(np.sqrt((y * y).sum(axis=-1, keepdims=True)), eps)

    q, k = l2(q), l2(k)
    heads = np.arange(hv) % hk
    state = np.zeros((hv, dk, dk), dtype=x.dtype)  # S[h][j][i]: row j over keys i
    o = np.empty((t, hv, dk), dtype=x.dtype)
    scale = 1.0 / math.sqrt(dk)
    for s in range(t):
        qs, ks = q[s, heads], k[s, heads]  # (Hv, dk)
        state *= np.exp(g[s])[:, None, None]
        sk = np.einsum("hji,hi->hj", state, ks)
        d = (v[s] - sk) * beta[s][:, None]
        state += d[:, :, None] * ks[:, None, :]
        o[s] = np.einsum("hji,hi->hj", state, qs) * scale
    ms = np.mean(o * o, axis=-1, keepdims=True)
    o = o / np.sqrt(ms + eps) * w.norm
    o = o * silu(z.reshape(t, hv, dk))
    return o.reshape(t, hv * dk) @ w.w_out.T
