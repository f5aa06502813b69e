#!/usr/bin/env python3
"""The multi-token-prediction head of a Qwen 3.5 GGUF file (its block after
the model's own, `nextn_predict_layers = 1`), in NumPy float64, for
crates/baton-model's MTP tests.

For tokens t_0..t_{T-1}, the model's final hidden states h_p (after the
output norm) come from llama_ref.py's model; the head's row of position p
(p = 0..T-2) joins h_p with the next token t_{p+1}:

    x   = eh_proj([enorm(embed(t_{p+1})) ; hnorm(h_p)])
    x  += attention(attn_norm(x))      causal over the head's rows 0..p,
                                       RoPE at position p
    x  += ffn(post_attention_norm(x))
    out = output(shared_head_norm(x))

Usage: mtp_ref.py MODEL.gguf --tokens 1,2,3  -> JSON {"logits": [[...]...]}
(T-1 rows). With `--hidden FILE` (T rows of n_embd little-endian float32,
e.g. the hidden states Baton's model gave), the head reads those in place
of the reference model's own: the head alone against its definition.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import llama_ref  # noqa: E402


def mtp_layer(model: "llama_ref.LlamaModel", block: int) -> "llama_ref.Layer":
    """The head's block as one of llama_ref's attending layers."""
    by_name = {t.name: t for t in model.reader.tensors}

    def get(name):
        return llama_ref.load_tensor(by_name[name]).astype(model.dtype, copy=False)

    b = f"blk.{block}."
    layer = llama_ref.Layer(
        attn_norm=get(b + "attn_norm.weight"),
        wq=get(b + "attn_q.weight"),
        wk=get(b + "attn_k.weight"),
        wv=get(b + "attn_v.weight"),
        wo=get(b + "attn_output.weight"),
        ffn_norm=get(b + "post_attention_norm.weight"),
        w_gate=None,
        w_up=None,
        w_down=None,
    )
    layer.q_norm = get(b + "attn_q_norm.weight")
    layer.k_norm = get(b + "attn_k_norm.weight")
    if model.cfg.traits["moe"]:
        layer.router = get(b + "ffn_gate_inp.weight")
        layer.w_gate = get(b + "ffn_gate_exps.weight")
        layer.w_up = get(b + "ffn_up_exps.weight")
        layer.w_down = get(b + "ffn_down_exps.weight")
        layer.shexp = tuple(get(b + n + ".weight") for n in
                            ("ffn_gate_inp_shexp", "ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp"))
    else:
        layer.w_gate = get(b + "ffn_gate.weight")
        layer.w_up = get(b + "ffn_up.weight")
        layer.w_down = get(b + "ffn_down.weight")
    layer.nextn = {n: get(b + "nextn." + n + ".weight") for n in ("eh_proj", "enorm", "hnorm", "shared_head_norm")}
    return layer


def hidden_states(model: "llama_ref.LlamaModel", tokens) -> np.ndarray:
    """The model's final hidden states (after the output norm), one row per token."""
    out = model.output
    try:
        # forward() ends with x @ output.T: an identity output gives the rows.
        model.output = np.eye(model.cfg.n_embd, dtype=model.dtype)
        return model.forward(tokens)
    finally:
        model.output = out


def mtp_logits(model: "llama_ref.LlamaModel", tokens, hidden=None) -> np.ndarray:
    cfg = model.cfg
    block = cfg.n_layer
    layer = mtp_layer(model, block)
    h = (hidden_states(model, tokens) if hidden is None else hidden)[:-1]
    e = model.tok_embd[np.asarray(tokens[1:], dtype=np.int64)]
    n = layer.nextn
    joined = np.concatenate([model.rms_norm(e, n["enorm"]), model.rms_norm(h, n["hnorm"])], axis=-1)
    x = joined @ n["eh_proj"].T
    with np.errstate(over="ignore"):
        x = x + model.attention(model.rms_norm(x, layer.attn_norm), layer, block)
        x = x + model.ffn(model.rms_norm(x, layer.ffn_norm), layer)
    return model.rms_norm(x, n["shared_head_norm"]) @ model.output.T


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--tokens", required=True, help="comma-separated token ids (at least 2)")
    ap.add_argument("--hidden", help="the model's hidden states: one row of n_embd float32 per token")
    args = ap.parse_args()
    model = llama_ref.LlamaModel(args.model)
    tokens = llama_ref.parse_ids(args.tokens)
    if len(tokens) < 2:
        raise SystemExit("need at least 2 tokens")
    hidden = None
    if args.hidden:
        raw = np.fromfile(args.hidden, dtype="<f4")
        if raw.size != len(tokens) * model.cfg.n_embd:
            raise SystemExit(f"{args.hidden}: {raw.size} values, not {len(tokens)} rows of {model.cfg.n_embd}")
        hidden = raw.reshape(len(tokens), model.cfg.n_embd).astype(model.dtype)
    logits = mtp_logits(model, tokens, hidden)
    print(json.dumps({"logits": [[float(v) for v in row] for row in logits]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
