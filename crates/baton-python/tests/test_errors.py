"""Bad arguments raise TypeError or ValueError (or Baton's errors) with a
message that names what is wrong, and the model keeps working."""

import pytest

import baton


def test_bad_load_arguments(model_path):
    cases = [
        (lambda: baton.Llama(123), TypeError, "model_path"),
        (lambda: baton.Llama(model_path, n_ctx=-1), ValueError, "n_ctx"),
        (lambda: baton.Llama(model_path, n_threads="two"), TypeError, "n_threads"),
        (lambda: baton.Llama(model_path, n_batch=0), ValueError, "n_batch"),
        (lambda: baton.Llama(model_path, devices=["gpu:7"]), ValueError, "unknown device"),
        (lambda: baton.Llama(model_path, devices=[]), ValueError, "devices is empty"),
        (lambda: baton.Llama(model_path, split_mode="rows"), ValueError, "split mode"),
        (lambda: baton.Llama(model_path, type_k="q9_9"), ValueError, "type_k"),
        (lambda: baton.Llama(model_path, devices=["cpu:0"], tensor_split=[1, 2]), ValueError, "shares"),
        (lambda: baton.Llama("/nonexistent/model.gguf"), baton.ModelError, "/nonexistent/model.gguf"),
        (lambda: baton.Llama.from_known("no-such-model"), ValueError, "known models"),
    ]
    for make, error, fragment in cases:
        with pytest.raises(error, match=fragment):
            make()


def test_a_file_that_is_not_gguf_is_a_model_error(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\xff" * 60)
    with pytest.raises(baton.ModelError):
        baton.Llama(str(bad), verbose=False)


def test_bad_generation_arguments(llm):
    expected = llm("Hello", max_tokens=4, temperature=0)["choices"][0]["text"]
    cases = [
        (lambda: llm(123), TypeError, "prompt"),
        (lambda: llm("x", temperature="hot"), TypeError, "temperature"),
        (lambda: llm("x", temperature=-1.0), ValueError, "temperature"),
        (lambda: llm("x", top_p=0.0), ValueError, "top_p"),
        (lambda: llm("x", min_p=2.0), ValueError, "min_p"),
        (lambda: llm("x", max_tokens="5"), TypeError, "max_tokens"),
        (lambda: llm("x", stop=[""]), ValueError, "stop"),
        (lambda: llm("x", stop=[1]), TypeError, "stop"),
        (lambda: llm("x", seed=-5), ValueError, "seed"),
        (lambda: llm("x", seed=2**70), ValueError, "seed"),
        (lambda: llm("x", logprobs=21), ValueError, "21"),
        (lambda: llm("x", suffix="y"), ValueError, "suffix"),
        (lambda: llm([llm.n_vocab()]), ValueError, "outside the vocabulary"),
        (lambda: llm([-1]), ValueError, "token id"),
        (lambda: llm([]), ValueError, "no tokens"),
        (lambda: llm("word " * 2000), ValueError, "exceed context window"),
        (lambda: llm.create_chat_completion([]), ValueError, "messages is empty"),
        (lambda: llm.create_chat_completion("hi"), TypeError, "messages"),
        (lambda: llm.create_chat_completion([{"content": "x"}]), ValueError, "role"),
        (lambda: llm.create_chat_completion([{"role": "user", "content": 5}]), TypeError, "content"),
        (lambda: llm.create_chat_completion([{"role": "user", "content": "x"}], top_logprobs=2), ValueError, "logprobs"),
        (
            lambda: llm.create_chat_completion([{"role": "user", "content": "x"}], response_format={"type": "json_schema"}),
            ValueError,
            "response_format",
        ),
        (
            lambda: llm.create_chat_completion([{"role": "user", "content": "x"}], response_format={
                "type": "json_schema", "json_schema": {"schema": {"type": "string", "pattern": "(a"}}}),
            ValueError,
            "json_schema",
        ),
        (
            lambda: llm.create_chat_completion(
                [{"role": "user", "content": "x"}], response_format={"type": "json_object", "schema": {"type": 3}}),
            ValueError,
            "type",
        ),
        (
            lambda: llm.create_chat_completion([{"role": "user", "content": "x"}], tools=[{"type": "function"}]),
            ValueError,
            "function is missing",
        ),
        (lambda: llm.tokenize(42), TypeError, "bytes or str"),
        (lambda: llm.tokenize(b"\xff\xfe"), ValueError, "UTF-8"),
        (lambda: llm.detokenize([2**40]), ValueError, "token id"),
        (lambda: llm.detokenize([llm.n_vocab() + 5]), ValueError, "outside the vocabulary"),
    ]
    for make, error, fragment in cases:
        with pytest.raises(error, match=fragment):
            make()
    assert llm("Hello", max_tokens=4, temperature=0)["choices"][0]["text"] == expected


def test_max_tokens_beyond_the_context_ends_at_its_end(llm):
    prompt = llm.tokenize(b"word " * 200)
    out = llm(prompt, max_tokens=10_000, temperature=0)
    assert out["usage"]["prompt_tokens"] + out["usage"]["completion_tokens"] <= llm.n_ctx()
