"""llama-cpp-python's constructor arguments, read into Baton's: what Baton
applies is translated, what it cannot apply is collected into notes that
``Llama`` says once (a ``warnings`` warning, and in ``verbose`` output)."""

import numbers
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ._speculative import LlamaMtpDecoding

# llama.cpp's ggml_type numbers of the KV cache types Baton has.
_GGML_CACHE_TYPES = {0: "f32", 1: "f16", 2: "q4_0", 8: "q8_0", 30: "bf16"}
# llama.cpp's split modes (LLAMA_SPLIT_MODE_NONE, _LAYER, _ROW).
_SPLIT_MODES = {0: "none", 1: "layer", 2: "tensor"}
# llama.cpp's pooling types Baton has (LLAMA_POOLING_TYPE_MEAN, _LAST).
_POOLING_TYPES = {1: "mean", 3: "last"}

# llama-cpp-python's settings Baton does not apply, with the value that
# changes nothing (its default): any other value is noted.
NOT_APPLIED: Dict[str, Any] = {
    "vocab_only": False,
    "use_mmap": True,
    "use_mlock": False,
    "kv_overrides": None,
    "rope_scaling_type": -1,
    "attention_type": -1,
    "rope_freq_base": 0.0,
    "rope_freq_scale": 0.0,
    "yarn_ext_factor": -1.0,
    "yarn_attn_factor": 1.0,
    "yarn_beta_fast": 32.0,
    "yarn_beta_slow": 1.0,
    "yarn_orig_ctx": 0,
    "offload_kqv": True,
    "flash_attn": False,
    "op_offload": None,
    "swa_full": None,
    "lora_base": None,
    "lora_scale": 1.0,
    "lora_path": None,
    "numa": False,
    "chat_handler": None,
    "tokenizer": None,
    "spm_infill": False,
    "n_parts": -1,
    "f16_kv": True,
    "device": None,
}

_WHY = {
    "vocab_only": "Baton loads the weights with the vocabulary",
    "use_mmap": "Baton reads the file its own way",
    "use_mlock": "Baton reads the file its own way",
    "kv_overrides": "GGUF metadata overrides are not served",
    "rope_scaling_type": "the RoPE settings come from the GGUF file",
    "attention_type": "attention is the model's own",
    "offload_kqv": "the KV cache lives on the device of its layer",
    "flash_attn": "Baton's attention kernels are its own, not a switch",
    "op_offload": "Baton places each operation on its layer's device",
    "swa_full": "the sliding-window cache is sized by Baton",
    "lora_base": "LoRA adapters are not served",
    "lora_scale": "LoRA adapters are not served",
    "lora_path": "LoRA adapters are not served",
    "numa": "Baton places its CPU threads itself (devices=['cpu:0', ...])",
    "chat_handler": "the chat template of the GGUF file answers chats",
    "tokenizer": "the tokenizer of the GGUF file is used",
    "spm_infill": "fill-in-the-middle is not served",
    "n_parts": "a GGUF file is one part",
    "f16_kv": "the cache's types are type_k and type_v",
    "device": "Baton places the model by devices=[...] or n_gpu_layers",
}


def _why(name: str) -> str:
    if name.startswith(("rope_", "yarn_")):
        return "the RoPE settings come from the GGUF file"
    return _WHY.get(name, "not served by Baton")


def not_applied(values: Dict[str, Any]) -> List[str]:
    """Notes for the settings in ``values`` that differ from the value that
    changes nothing."""
    notes = []
    for name, default in NOT_APPLIED.items():
        value = values[name]
        if value is default or (default is not None and not isinstance(value, str) and value == default):
            continue
        notes.append(f"{name}={value!r} is accepted but not applied: {_why(name)}")
    return notes


def cache_type(name: str, value: Union[None, int, str], notes: List[str]) -> str:
    """Baton's name of a KV cache type given as Baton's name or llama.cpp's
    ggml_type number (``None``: f16, llama.cpp's default)."""
    if value is None:
        return "f16"
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        if int(value) in _GGML_CACHE_TYPES:
            return _GGML_CACHE_TYPES[int(value)]
        notes.append(f"{name}={value!r} (a ggml type Baton's cache does not have) is not applied: the cache is f16")
        return "f16"
    return value  # Baton's own names, checked by Llama.


def split_mode(value: Union[int, str]) -> Union[int, str]:
    """Baton's split mode of llama.cpp's number or Baton's name (a name is
    checked by the loader)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) in _SPLIT_MODES:
        return _SPLIT_MODES[int(value)]
    return value


def pooling(pooling: str, pooling_type: int, notes: List[str]) -> str:
    """``pooling``, or llama.cpp's ``pooling_type`` where it names one Baton
    has (-1, unspecified: ``pooling``)."""
    if pooling_type is None or pooling_type == -1:
        return pooling
    if pooling_type in _POOLING_TYPES:
        return _POOLING_TYPES[pooling_type]
    notes.append(f"pooling_type={pooling_type!r} is not applied: Baton pools by 'mean' or 'last' (pooling={pooling!r})")
    return pooling


def gpu_devices(
    n_gpu_layers: int,
    main_gpu: int,
    tensor_split: Optional[Sequence[float]],
    available: List[str],
    notes: List[str],
) -> Tuple[Optional[str], Optional[Sequence[float]]]:
    """The devices ``n_gpu_layers`` asks for, with the shares to pass: the
    Vulkan devices there are, else None (the CPU) and a note."""
    if n_gpu_layers == 0:
        return None, tensor_split
    if not available:
        notes.append(f"n_gpu_layers={n_gpu_layers} is accepted but there is no Vulkan GPU here: the model runs on the CPU")
        return None, None
    shares = [float(s) for s in (tensor_split or [])]
    used = [i for i, s in enumerate(shares) if s > 0]
    if len(used) > 1 and max(used) < len(available):
        names = [available[i] for i in used]
        chosen, out_shares = ",".join(names), [shares[i] for i in used]
    else:
        if len(used) > 1:
            notes.append(f"tensor_split={list(tensor_split or [])} is not applied: {len(available)} Vulkan device(s) here")
        index = main_gpu if 0 <= main_gpu < len(available) else 0
        if index != main_gpu:
            notes.append(f"main_gpu={main_gpu} is not a Vulkan device here: {available[0]} is used")
        chosen, out_shares = available[index], None
    if n_gpu_layers > 0:
        notes.append(
            f"n_gpu_layers={n_gpu_layers}: Baton offloads whole models, all layers go to {chosen}"
        )
    return chosen, out_shares


def draft(draft_model: Any, notes: List[str]) -> Optional[Tuple[str, int, int]]:
    """The drafting ``draft_model`` asks for, as (type, the most drafted
    tokens a step verifies, the longest n-gram looked up): prompt lookup
    (llama-cpp-python's ``LlamaPromptLookupDecoding``, ``"ngram"``) or the
    model's own prediction head (``baton.LlamaMtpDecoding``, ``"mtp"``,
    n-gram 0). Any other draft model is noted as not applied
    (``baton run --model-draft`` takes a draft model)."""
    if draft_model is None:
        return None
    tokens = getattr(draft_model, "num_pred_tokens", None)
    if isinstance(draft_model, LlamaMtpDecoding):
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 1:
            raise ValueError(f"num_pred_tokens must be 1 at least, not {tokens!r}")
        return ("mtp", tokens, 0)
    ngram = getattr(draft_model, "max_ngram_size", None)
    if isinstance(tokens, int) and isinstance(ngram, int) and not isinstance(tokens, bool):
        if tokens < 1 or not 1 <= ngram <= 64:
            raise ValueError(
                f"num_pred_tokens must be 1 at least and max_ngram_size 1 to 64, not {tokens} and {ngram}"
            )
        return ("ngram", tokens, ngram)
    notes.append(
        f"draft_model={draft_model!r} is accepted but not applied: Baton drafts by prompt lookup "
        "(llama_cpp.llama_speculative.LlamaPromptLookupDecoding) or the model's own prediction head "
        "(baton.LlamaMtpDecoding)"
    )
    return None
