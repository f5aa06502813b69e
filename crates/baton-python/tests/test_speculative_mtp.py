"""Baton's ``Llama(draft_model=baton.LlamaMtpDecoding(...))``: drafting with
the model's own multi-token-prediction head (the qwen35 toy's MTP block,
written by ``baton model synth``) gives the tokens decoding without drafts
gives, greedy and sampled, and the head drafted; a file without the block
is refused by name. The toy's head is random weights: its drafts are
rarely accepted, so acceptance is not asserted."""

import subprocess

import pytest

import baton

PROMPTS = ("one two three four five six seven eight", "a b c d e f g h i j k l m n o p")


@pytest.fixture(scope="module")
def qwen35_path(baton_bin, tmp_path_factory):
    path = tmp_path_factory.mktemp("mtp") / "qwen35.gguf"
    subprocess.run(
        [baton_bin, "model", "synth", "--shape", "qwen35", "--type", "f32", "-o", str(path)],
        check=True,
        capture_output=True,
    )
    return str(path)


def test_the_models_head_drafts_change_no_token(qwen35_path):
    plain = baton.Llama(model_path=qwen35_path, n_ctx=256, verbose=False)
    drafting = baton.Llama(
        model_path=qwen35_path, n_ctx=256, verbose=False, draft_model=baton.LlamaMtpDecoding(num_pred_tokens=4)
    )
    assert not any("draft_model" in note for note in drafting.unapplied)
    for prompt in PROMPTS:
        for kwargs in ({"temperature": 0}, {"temperature": 0.9, "seed": 11, "repeat_penalty": 1.1}):
            want = plain(prompt, max_tokens=32, **kwargs)
            got = drafting(prompt, max_tokens=32, **kwargs)
            assert got["choices"][0]["text"] == want["choices"][0]["text"], (prompt, kwargs)
            assert got["usage"]["completion_tokens"] == want["usage"]["completion_tokens"], (prompt, kwargs)
    drafted, accepted = drafting._model.speculative_counts
    assert drafted > 0 and accepted <= drafted, (drafted, accepted)
    assert plain._model.speculative_counts == (0, 0)
    plain.close()
    drafting.close()


def test_the_head_on_a_file_without_the_block_is_refused(model_path):
    with pytest.raises(ValueError, match="multi-token-prediction block"):
        baton.Llama(model_path=model_path, n_ctx=256, verbose=False, draft_model=baton.LlamaMtpDecoding())
    with pytest.raises(ValueError, match="num_pred_tokens"):
        baton.Llama(model_path=model_path, n_ctx=256, verbose=False, draft_model=baton.LlamaMtpDecoding(0))
