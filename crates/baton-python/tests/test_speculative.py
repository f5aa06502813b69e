"""llama-cpp-python's prompt-lookup drafting
(``Llama(draft_model=LlamaPromptLookupDecoding(...))``): decoding with
n-gram drafts verified in one step gives the tokens decoding without them
gives, greedy and sampled; drafts were made and some accepted."""

import pytest

import baton
from llama_cpp.llama_speculative import LlamaDraftModel, LlamaPromptLookupDecoding

PROMPT = (
    "Repeat the list exactly.\nList: apples, pears, plums, cherries, grapes, lemons, limes.\n"
    "Again: apples, pears, plums, cherries, grapes, lemons, limes.\nAgain:"
)


def test_prompt_lookup_drafts_change_no_token(model_path, llm):
    drafting = baton.Llama(
        model_path=model_path, n_ctx=1024, verbose=False, draft_model=LlamaPromptLookupDecoding(num_pred_tokens=8)
    )
    assert not any("draft_model" in note for note in drafting.unapplied)
    for kwargs in ({"temperature": 0}, {"temperature": 0.9, "seed": 11, "repeat_penalty": 1.1}):
        plain = llm(PROMPT, max_tokens=48, **kwargs)
        spec = drafting(PROMPT, max_tokens=48, **kwargs)
        assert spec["choices"][0]["text"] == plain["choices"][0]["text"], kwargs
        assert spec["usage"]["completion_tokens"] == plain["usage"]["completion_tokens"], kwargs
    drafted, accepted = drafting._model.speculative_counts
    assert drafted > 0 and 0 < accepted <= drafted, (drafted, accepted)
    drafting.close()


def test_other_draft_models_are_noted_and_bad_sizes_refused(model_path):
    with pytest.warns(UserWarning, match="draft_model=.* is accepted but not applied"):
        other = baton.Llama(model_path=model_path, n_ctx=256, verbose=False, draft_model=LlamaDraftModel())
    other.close()
    for bad in (LlamaPromptLookupDecoding(0, 0), LlamaPromptLookupDecoding(max_ngram_size=10**9)):
        with pytest.raises(ValueError, match="num_pred_tokens"):
            baton.Llama(model_path=model_path, n_ctx=256, verbose=False, draft_model=bad)
