"""Tokens and log-probabilities through the bindings."""

import json
import math
import os

import pytest


def reference_cases():
    path = os.environ.get("BATON_TOKENIZER_REF")
    if not path or not os.path.isfile(path):
        pytest.fail("BATON_TOKENIZER_REF names no file (tests/reference/tokenizer_ref.py writes it)")
    with open(path) as f:
        variants = json.load(f)["variants"]
    (smollm,) = [v for v in variants if v["pre"] == "smollm"]
    return smollm["cases"]


def test_tokenize_gives_the_reference_tokenizers_ids(llm):
    cases = reference_cases()
    assert len(cases) > 20
    for case in cases:
        # The reference (HF tokenizers) parses the special tokens' texts.
        ids = llm.tokenize(case["text"].encode("utf-8"), add_bos=False, special=True)
        assert ids == case["ids"], case["text"]
        assert llm.detokenize(ids, special=True) == case["text"].encode("utf-8")


def test_tokenize_takes_str_and_parses_special_tokens_only_when_asked(llm):
    assert llm.tokenize("Hello world", add_bos=False) == llm.tokenize(b"Hello world", add_bos=False)
    special = llm.tokenize(b"<|im_start|>", add_bos=False, special=True)
    assert len(special) == 1
    assert len(llm.tokenize(b"<|im_start|>", add_bos=False, special=False)) > 1
    assert llm.detokenize(special, special=True) == b"<|im_start|>"
    assert llm.detokenize(special) == b""


def test_completion_logprobs_are_log_probabilities_of_the_greedy_tokens(llm):
    out = llm("The capital of France is", max_tokens=6, temperature=0, logprobs=3)
    (choice,) = out["choices"]
    lp = choice["logprobs"]
    n = out["usage"]["completion_tokens"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == len(lp["text_offset"])
    assert len(lp["tokens"]) >= n - 1, "every token sent as text has its entry"
    assert "".join(lp["tokens"]).startswith(choice["text"]) or choice["text"].startswith("".join(lp["tokens"]))
    for value, top in zip(lp["token_logprobs"], lp["top_logprobs"]):
        assert value <= 0 and math.isfinite(value)
        assert 1 <= len(top) <= 3
        # Greedy: the drawn token is the most likely one.
        assert value == pytest.approx(max(top.values()), abs=1e-6)
        assert sum(math.exp(v) for v in top.values()) <= 1 + 1e-5


def test_chat_logprobs_have_openais_shape(llm):
    out = llm.create_chat_completion(
        [{"role": "user", "content": "Say hi."}], max_tokens=4, temperature=0, logprobs=True, top_logprobs=2
    )
    content = out["choices"][0]["logprobs"]["content"]
    assert content, "one entry per generated token"
    for entry in content:
        assert set(entry) == {"token", "logprob", "bytes", "top_logprobs"}
        assert bytes(entry["bytes"]).decode("utf-8", errors="replace") == entry["token"]
        assert len(entry["top_logprobs"]) == 2
        assert entry["top_logprobs"][0]["logprob"] >= entry["top_logprobs"][1]["logprob"]


def test_embeddings_are_pooled_hidden_states(llm, model_path):
    import baton

    one = llm.embed("The cat sat on the mat.")
    assert isinstance(one, list) and len(one) == 576 and all(isinstance(x, float) for x in one)
    unit = llm.embed("The cat sat on the mat.", normalize=True)
    norm = math.sqrt(sum(x * x for x in one))
    assert sum(x * x for x in unit) == pytest.approx(1.0, abs=1e-5)
    assert unit == pytest.approx([x / norm for x in one], abs=1e-6)
    many, count = llm.embed(["The cat sat on the mat.", "Quantum chromodynamics."], return_count=True)
    assert many[0] == one and count == len(llm.tokenize(b"The cat sat on the mat.")) + len(
        llm.tokenize(b"Quantum chromodynamics.")
    )
    response = llm.create_embedding(["a", "b"])
    assert response["object"] == "list" and [d["index"] for d in response["data"]] == [0, 1]
    with baton.Llama(model_path, n_threads=2, pooling="last", verbose=False) as last:
        assert last.embed("The cat sat on the mat.") != one, "the last token's state is not the mean"
    with pytest.raises(TypeError):
        llm.embed(5)
    with pytest.raises(ValueError, match="exceed context"):
        llm.embed("word " * 1000, truncate=False)
    assert len(llm.embed("word " * 1000)) == 576, "a long text is cut to the context"


def test_echo_with_logprobs_scores_the_prompt_then_the_completion(llm):
    prompt = "The capital of France is"
    n_prompt = len(llm.tokenize(prompt.encode()))
    out = llm(prompt, max_tokens=4, temperature=0, echo=True, logprobs=2)
    (choice,) = out["choices"]
    lp = choice["logprobs"]
    assert choice["text"].startswith(prompt)
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None, "nothing predicts the first token"
    assert len(lp["tokens"]) >= n_prompt + out["usage"]["completion_tokens"] - 1
    assert all(v <= 0 for v in lp["token_logprobs"][1:])
    assert lp["text_offset"] == sorted(lp["text_offset"])
    plain = llm(prompt, max_tokens=4, temperature=0, logprobs=2)["choices"][0]["logprobs"]
    assert lp["token_logprobs"][n_prompt:] == plain["token_logprobs"], "the completion's entries follow the prompt's"
    streamed = list(llm(prompt, max_tokens=4, temperature=0, echo=True, logprobs=2, stream=True))
    assert streamed[0]["choices"][0]["text"] == prompt
    assert streamed[0]["choices"][0]["logprobs"]["token_logprobs"] == lp["token_logprobs"][:n_prompt]
