"""llama-cpp-python's constructor arguments on baton.Llama: code written
for llama_cpp.Llama constructs unchanged (issue 48, item 1)."""

import inspect
import warnings

import pytest

import baton

# Every keyword argument of llama-cpp-python 0.3.16's Llama.__init__
# (llama_cpp/llama.py), with its default, extracted by hand from that
# release; ggml and llama.cpp enum defaults written as their numbers.
LLAMA_CPP_PYTHON_0_3_16_KWARGS = {
    "n_gpu_layers": 0,
    "split_mode": 1,  # LLAMA_SPLIT_MODE_LAYER
    "main_gpu": 0,
    "tensor_split": None,
    "vocab_only": False,
    "use_mmap": True,
    "use_mlock": False,
    "kv_overrides": None,
    "seed": 0xFFFFFFFF,  # LLAMA_DEFAULT_SEED
    "n_ctx": 512,
    "n_batch": 512,
    "n_ubatch": 512,
    "n_threads": None,
    "n_threads_batch": None,
    "rope_scaling_type": -1,  # LLAMA_ROPE_SCALING_TYPE_UNSPECIFIED
    "pooling_type": -1,  # LLAMA_POOLING_TYPE_UNSPECIFIED
    "attention_type": -1,  # LLAMA_ATTENTION_TYPE_UNSPECIFIED
    "rope_freq_base": 0.0,
    "rope_freq_scale": 0.0,
    "yarn_ext_factor": -1.0,
    "yarn_attn_factor": 1.0,
    "yarn_beta_fast": 32.0,
    "yarn_beta_slow": 1.0,
    "yarn_orig_ctx": 0,
    "logits_all": False,
    "embedding": False,
    "offload_kqv": True,
    "flash_attn": False,
    "op_offload": None,
    "swa_full": None,
    "no_perf": False,
    "last_n_tokens_size": 64,
    "lora_base": None,
    "lora_scale": 1.0,
    "lora_path": None,
    "numa": False,
    "chat_format": None,
    "chat_handler": None,
    "draft_model": None,
    "tokenizer": None,
    "type_k": None,
    "type_v": None,
    "spm_infill": False,
    "verbose": True,
}

# A value other than the default for each argument Baton takes but does
# not apply.
NOT_APPLIED_VALUES = {
    "vocab_only": True,
    "use_mmap": False,
    "use_mlock": True,
    "kv_overrides": {"llama.context_length": 4096},
    "rope_scaling_type": 1,
    "attention_type": 1,
    "rope_freq_base": 20000.0,
    "rope_freq_scale": 0.5,
    "yarn_ext_factor": 0.5,
    "yarn_attn_factor": 2.0,
    "yarn_beta_fast": 16.0,
    "yarn_beta_slow": 2.0,
    "yarn_orig_ctx": 4096,
    "offload_kqv": False,
    "flash_attn": True,
    "op_offload": True,
    "swa_full": True,
    "lora_base": "/nowhere/base.gguf",
    "lora_scale": 0.5,
    "lora_path": "/nowhere/lora.gguf",
    "numa": True,
    "chat_handler": object(),
    "draft_model": object(),
    "tokenizer": object(),
    "spm_infill": True,
}


def test_the_signature_names_every_llama_cpp_python_kwarg():
    params = inspect.signature(baton.Llama.__init__).parameters
    missing = [name for name in LLAMA_CPP_PYTHON_0_3_16_KWARGS if name not in params]
    assert missing == []
    for name in LLAMA_CPP_PYTHON_0_3_16_KWARGS:
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY


def test_the_readme_line_of_llama_cpp_python_runs(model_path):
    # llama-cpp-python's README, first example, with only the import changed.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        llm = baton.Llama(model_path=model_path, n_gpu_layers=-1, seed=1337, n_ctx=2048)
    with llm:
        assert llm.n_ctx() == 2048
        assert llm.n_gpu_layers == -1
        out = llm("Q: Name the planets in the solar system? A: ", max_tokens=32, stop=["Q:", "\n"], echo=True)
        assert out["choices"][0]["text"].startswith("Q: Name the planets")
        if llm.devices == "cpu":
            # No Vulkan GPU here: accepted and said, once.
            said = [w for w in caught if "n_gpu_layers" in str(w.message)]
            assert len(said) == 1
        else:
            assert llm.devices.startswith("vulkan:")


def test_every_llama_cpp_python_kwarg_is_accepted_at_its_default(model_path, capsys):
    kwargs = dict(LLAMA_CPP_PYTHON_0_3_16_KWARGS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with baton.Llama(model_path, **kwargs) as llm:
            assert llm.n_ctx() == 512
            assert llm.unapplied == []
    # Defaults change nothing, so nothing is said.
    assert [str(w.message) for w in caught if "baton.Llama" in str(w.message)] == []
    assert "loaded" in capsys.readouterr().err  # verbose=True


def test_what_cannot_apply_is_accepted_and_said_once(model_path, capsys):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with baton.Llama(model_path, n_threads=2, verbose=True, **NOT_APPLIED_VALUES) as llm:
            assert llm("Hello", max_tokens=2)["choices"][0]["text"] is not None
            notes = llm.unapplied
    said = [str(w.message) for w in caught if "baton.Llama" in str(w.message)]
    assert len(said) == 1
    for name in NOT_APPLIED_VALUES:
        assert f"{name}=" in said[0], name
    assert len(notes) == len(NOT_APPLIED_VALUES)
    err = capsys.readouterr().err
    assert "lora_path='/nowhere/lora.gguf' is accepted but not applied" in err


def test_llama_cpp_numbers_for_split_and_cache_types_apply(model_path):
    # GGML_TYPE_Q8_0 = 8, GGML_TYPE_F32 = 0; LLAMA_SPLIT_MODE_NONE = 0.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with baton.Llama(model_path, type_k=8, type_v=0, split_mode=0, n_threads=2, verbose=False) as llm:
            assert llm("Hello", max_tokens=2, temperature=0.0)["usage"]["completion_tokens"] >= 1
    # A ggml type Baton's cache does not have (Q5_0 = 6): said, the cache is f16.
    with pytest.warns(UserWarning, match="type_k=6"):
        with baton.Llama(model_path, type_k=6, n_threads=2, verbose=False) as llm:
            assert llm.unapplied


def test_n_ctx_applies(model_path):
    with baton.Llama(model_path, n_ctx=64, n_threads=2, verbose=False) as small:
        assert small.n_ctx() == 64
        with pytest.raises(ValueError, match="context window of 64"):
            small("word " * 100, max_tokens=1)
    with baton.Llama(model_path, n_ctx=1024, n_threads_batch=2, verbose=False) as large:
        assert large.n_ctx() == 1024


def test_seed_makes_sampling_reproducible(model_path):
    def sample(seed):
        with baton.Llama(model_path, seed=seed, n_threads=2, verbose=False) as llm:
            return [llm("Once upon a time", max_tokens=12, temperature=1.0)["choices"][0]["text"] for _ in range(2)]

    first, again, other = sample(1337), sample(1337), sample(7)
    assert first == again
    assert other != first


def test_chat_format_that_maps_is_applied_and_one_that_does_not_is_said(model_path):
    # SmolLM2's template is ChatML.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with baton.Llama(model_path, chat_format="chatml", n_threads=2, verbose=False) as llm:
            assert llm.unapplied == []
    with pytest.warns(UserWarning, match="chat_format='llama-2'"):
        with baton.Llama(model_path, chat_format="llama-2", n_threads=2, verbose=False):
            pass


def test_an_unknown_kwarg_is_still_a_type_error(model_path):
    with pytest.raises(TypeError, match="n_gpu_layer"):
        baton.Llama(model_path, n_gpu_layer=-1)
    with pytest.raises(TypeError, match="not_a_llama_cpp_argument"):
        baton.Llama(model_path, not_a_llama_cpp_argument=1)


def test_from_pretrained_says_there_is_no_hub():
    with pytest.raises(NotImplementedError, match="Hugging Face Hub"):
        baton.Llama.from_pretrained(repo_id="Qwen/Qwen2-0.5B-Instruct-GGUF", filename="*q8_0.gguf", verbose=False)
