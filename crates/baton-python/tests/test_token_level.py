"""llama-cpp-python's token-level API on baton.Llama (issue 48): eval,
sample, generate, reset, n_tokens, input_ids and scores, save_state and
load_state (a LlamaState pickles), with llama-cpp-python's semantics."""

import json
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import baton
import llama_cpp

PROMPT = b"Q: Name the planets in the solar system? A: "


@pytest.fixture(scope="module")
def llm_all(model_path):
    with baton.Llama(model_path, n_ctx=512, n_threads=2, logits_all=True, verbose=False) as model:
        yield model


def greedy_tokens(llm, tokens, limit):
    out = []
    for token in llm.generate(tokens, temp=0):
        if llm._ends_generation(token) or len(out) == limit:
            break
        out.append(token)
    return out


def test_eval_appends_tokens_and_every_row_of_logits(llm_all):
    llm_all.reset()
    tokens = llm_all.tokenize(PROMPT)
    llm_all.eval(tokens[:5])
    llm_all.eval(tokens[5:])
    assert llm_all.n_tokens == len(tokens)
    assert llm_all.input_ids[: len(tokens)].tolist() == tokens
    assert llm_all.scores.shape == (llm_all.n_ctx(), llm_all.n_vocab())
    assert llm_all._scores.shape == (len(tokens), llm_all.n_vocab())
    in_two = llm_all._scores.copy()
    llm_all.reset()
    assert llm_all.n_tokens == 0
    llm_all.eval(tokens)
    assert np.array_equal(llm_all._scores, in_two), "one eval or two give the same bits"
    assert np.isfinite(in_two).all()


def test_without_logits_all_scores_holds_the_last_row(llm, llm_all):
    tokens = llm.tokenize(PROMPT)
    llm.reset()
    llm.eval(tokens)
    assert llm.scores.shape == (1, llm.n_vocab())
    llm_all.reset()
    llm_all.eval(tokens)
    assert np.array_equal(llm.scores[0], llm_all.scores[len(tokens) - 1])


def test_sample_at_temperature_zero_is_the_argmax(llm_all):
    llm_all.reset()
    llm_all.eval(llm_all.tokenize(PROMPT))
    assert llm_all.sample(temp=0) == int(np.argmax(llm_all.scores[llm_all.n_tokens - 1]))
    # idx picks an earlier row with logits_all.
    assert llm_all.sample(temp=0, idx=2) == int(np.argmax(llm_all.scores[2]))


def test_generate_agrees_with_greedy_create_completion_token_for_token(llm):
    tokens = llm.tokenize(PROMPT)
    generated = greedy_tokens(llm, tokens, 24)
    out = llm.create_completion(tokens, max_tokens=24, temperature=0)
    assert out["usage"]["completion_tokens"] == len(generated)
    assert llm.detokenize(generated).decode("utf-8") == out["choices"][0]["text"]
    # The same through the session-run completion (a stopping criterion
    # that never stops takes that path).
    local = llm.create_completion(
        tokens, max_tokens=24, temperature=0, stopping_criteria=baton.StoppingCriteriaList([lambda ids, logits: False])
    )
    assert local["choices"][0]["text"] == out["choices"][0]["text"]
    assert local["choices"][0]["finish_reason"] == out["choices"][0]["finish_reason"]


def test_generate_keeps_the_evaluated_prefix_and_reset_false_continues(llm_all):
    tokens = llm_all.tokenize(PROMPT)
    first = greedy_tokens(llm_all, tokens, 4)
    # The same prompt again: what was evaluated is kept (its last token
    # evaluated again for fresh logits), and the tokens are the same.
    again = greedy_tokens(llm_all, tokens, 4)
    assert again == first
    assert llm_all._state["reused"] == len(tokens) - 1
    # reset=False: the tokens follow what was evaluated.
    llm_all.reset()
    llm_all.eval(tokens[:3])
    gen = llm_all.generate(tokens[3:], temp=0, reset=False)
    assert next(gen) == first[0]
    gen.close()


def test_send_evaluates_given_tokens_after_the_one_yielded(llm_all):
    tokens = llm_all.tokenize(PROMPT)
    gen = llm_all.generate(tokens, temp=0)
    first = next(gen)
    extra = llm_all.tokenize(b" Mars", add_bos=False)
    gen.send(extra)
    assert llm_all.input_ids[len(tokens) : llm_all.n_tokens].tolist() == [first] + extra
    gen.close()


def test_logits_processor_changes_what_is_drawn(llm):
    tokens = llm.tokenize(PROMPT)
    (best,) = greedy_tokens(llm, tokens, 1)

    def ban_best(input_ids, scores):
        assert input_ids.tolist() == tokens, "the processor sees the evaluated tokens"
        scores[best] = -np.inf
        return scores

    gen = llm.generate(tokens, temp=0, logits_processor=baton.LogitsProcessorList([ban_best]))
    second = next(gen)
    gen.close()
    row = llm.scores[0].copy()
    row[best] = -np.inf
    assert second != best and second == int(np.argmax(row))


def test_stopping_criteria_ends_the_generation(llm):
    tokens = llm.tokenize(PROMPT)
    seen = []

    def after_three(input_ids, logits):
        seen.append(len(input_ids))
        assert logits.shape == (llm.n_vocab(),)
        return len(input_ids) >= len(tokens) + 3

    out = llm.create_completion(
        tokens, max_tokens=20, temperature=0, stopping_criteria=baton.StoppingCriteriaList([after_three])
    )
    assert out["usage"]["completion_tokens"] == 3
    assert out["choices"][0]["finish_reason"] == "stop"
    assert seen == [len(tokens), len(tokens) + 1, len(tokens) + 2, len(tokens) + 3]


def loads_bit_for_bit(llm_all, through):
    """Saves a state, passes it ``through`` (the state as it is, or a
    copy), evaluates something else, loads it back: the next logits are
    those the state's sequence gave. Returns the state and what came
    through."""
    tokens = llm_all.tokenize(PROMPT)
    llm_all.reset()
    llm_all.eval(tokens)
    state = llm_all.save_state()
    assert state.n_tokens == len(tokens) and state.llama_state_size > 0
    loaded = through(state)
    nxt = llm_all.tokenize(b" Mercury", add_bos=False)
    llm_all.eval(nxt)
    expected = llm_all._scores[len(tokens) :].copy()
    # Something else in between, then the state back.
    llm_all.reset()
    llm_all.eval(llm_all.tokenize(b"Something else entirely, longer than the saved prompt was."))
    llm_all.load_state(loaded)
    assert llm_all.n_tokens == len(tokens)
    assert llm_all.input_ids[: len(tokens)].tolist() == tokens
    llm_all.eval(nxt)
    assert np.array_equal(llm_all._scores[len(tokens) :], expected)
    return state, loaded


def test_save_and_load_give_the_same_next_logits_bit_for_bit(llm_all):
    loads_bit_for_bit(llm_all, lambda state: state)


def test_a_state_pickles_and_loads_bit_for_bit(llm_all):
    state, back = loads_bit_for_bit(llm_all, lambda state: pickle.loads(pickle.dumps(state)))
    assert isinstance(back, baton.LlamaState) and isinstance(back, llama_cpp.LlamaState)
    assert (back.n_tokens, back.llama_state_size, back.seed) == (state.n_tokens, state.llama_state_size, state.seed)
    assert np.array_equal(back.input_ids, state.input_ids) and np.array_equal(back.scores, state.scores)
    # An empty state pickles too; bytes that are not a saved state do not
    # unpickle.
    llm_all.reset()
    assert pickle.loads(pickle.dumps(llm_all.save_state())).n_tokens == 0
    kv = state.llama_state
    rebuild, (ids, identity, data) = kv.__reduce__()
    with pytest.raises(ValueError, match="saved state's bytes"):
        rebuild(ids, identity, b"junk")
    with pytest.raises(ValueError, match="saved state's bytes"):
        rebuild(ids, identity, data[:-1])
    with pytest.raises(ValueError, match="positions"):
        rebuild(ids[:-1], identity, data)


def test_a_state_loads_into_another_llama_of_the_same_file(llm, llm_all):
    tokens = llm.tokenize(PROMPT)
    llm.reset()
    llm.eval(tokens)
    state = llm.save_state()
    llm_all.load_state(state)
    venus = llm.tokenize(b" Venus", add_bos=False)
    llm_all.eval(venus)
    llm.eval(venus)
    assert np.array_equal(llm.scores[0], llm_all.scores[llm_all.n_tokens - 1])


def test_a_state_of_another_model_is_refused(llm, baton_bin, tmp_path):
    other_path = tmp_path / "tiny.gguf"
    subprocess.run([baton_bin, "model", "synth", "--shape", "tiny", "-o", str(other_path)], check=True, capture_output=True)
    with baton.Llama(str(other_path), n_ctx=64, n_threads=1, verbose=False) as other:
        other.eval(other.tokenize(b"hello"))
        state = other.save_state()
    llm.reset()
    llm.eval(llm.tokenize(PROMPT))
    before = llm.n_tokens
    with pytest.raises(ValueError, match="another model"):
        llm.load_state(state)
    assert llm.n_tokens == before, "a refused state changes nothing"


def test_bad_input_is_a_python_exception(llm):
    llm.reset()
    with pytest.raises(ValueError, match="no token has been evaluated"):
        llm.sample()
    with pytest.raises(TypeError, match="token ids"):
        llm.eval("text")
    with pytest.raises(TypeError, match="ints"):
        llm.eval([1.5])
    with pytest.raises(ValueError, match="not a token id"):
        llm.eval([-1])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        llm.eval([llm.n_vocab()])
    with pytest.raises(ValueError, match="context"):
        llm.eval([1] * (llm.n_ctx() + 1))
    assert llm.n_tokens == 0, "a refused eval evaluates nothing"
    llm.eval([1] * 10)
    with pytest.raises(ValueError, match="context"):
        llm.eval([1] * (llm.n_ctx() - 9))
    assert llm.n_tokens == 10
    with pytest.raises(TypeError, match="LlamaState"):
        llm.load_state({"n_tokens": 3})
    with pytest.raises(ValueError, match="only go back"):
        llm.n_tokens = 11
    with pytest.raises(ValueError, match="mirostat"):
        next(llm.generate([1, 2], mirostat_mode=2))
    with pytest.raises(ValueError, match="temperature|temp"):
        next(llm.generate([1, 2], temp=float("nan")))


def test_generating_to_the_end_of_the_context_is_a_value_error(model_path):
    with baton.Llama(model_path, n_ctx=32, n_threads=2, verbose=False) as small:
        tokens = small.tokenize(PROMPT)
        count = 0
        with pytest.raises(ValueError, match="context"):
            for _ in small.generate(tokens, temp=0):
                count += 1
        assert small.n_tokens == 32
        assert count == 32 - len(tokens) + 1


def test_the_token_api_runs_on_the_engines_model_not_a_second_copy(model_path):
    """One process: a Llama that answered a chat, then ran eval and generate
    and chatted again, peaks at well under a second copy of the weights
    above what loading it took (the engine lends its model to the session;
    before, the session loaded its own copy)."""
    script = Path(__file__).resolve().parents[3] / "scripts" / "python_rss.py"
    run = subprocess.run(
        [sys.executable, str(script), model_path, "--n-ctx", "512"], check=True, capture_output=True, text=True
    )
    figures = json.loads(run.stdout.strip().splitlines()[-1])
    assert figures["engine"] == "baton", figures
    assert figures["generated"] == 16 and figures["chat_same_after_token_api"], figures
    grown = figures["peak_rss_mib"] - figures["peak_rss_after_load_mib"]
    assert grown < figures["file_mib"] / 2, f"the token API grew the peak by {grown} MiB: {figures}"


def test_a_second_session_of_one_model_is_refused_while_the_first_lives(llm):
    llm.reset()
    llm.eval(llm.tokenize(PROMPT)[:3])
    with pytest.raises(RuntimeError, match="already has a token-level session"):
        baton._baton._Session.open(llm._model)
    assert llm.n_tokens == 3, "the first session is untouched"
