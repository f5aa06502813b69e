"""LlamaRAMCache (LlamaCache) on baton.Llama (issue 48): states kept by
their tokens, the longest shared start found, the capacity kept, and
completions that reuse a cached prompt's keys and values."""

import pytest

import baton

PROMPT = "Q: Name the planets in the solar system? A: "


def test_the_cache_finds_the_state_sharing_the_longest_start(llm):
    cache = baton.LlamaRAMCache(capacity_bytes=1 << 30)
    states = {}
    for text in (b"The sky", b"The sky is blue and"):
        llm.reset()
        tokens = llm.tokenize(text)
        llm.eval(tokens)
        states[text] = llm.save_state()
        cache[tokens] = states[text]
    key = llm.tokenize(b"The sky is blue and the grass")
    assert key in cache
    assert cache[key] is states[b"The sky is blue and"]
    # A tie goes to the state found first (least recently used).
    assert cache[llm.tokenize(b"The sky was")] is states[b"The sky"]
    assert cache.cache_size == sum(s.nbytes for s in states.values())
    with pytest.raises(KeyError):
        cache[[llm.n_vocab() - 1]]
    with pytest.raises(TypeError, match="LlamaState"):
        cache[[1, 2]] = "state"
    assert baton.LlamaCache is baton.LlamaRAMCache


def test_the_cache_holds_at_most_its_capacity(llm):
    llm.reset()
    llm.eval(llm.tokenize(b"one two three"))
    state = llm.save_state()
    cache = baton.LlamaRAMCache(capacity_bytes=state.nbytes * 2)
    for i in range(4):
        cache[[i + 1, 2, 3]] = state
    assert len(cache) == 2, "the least recently used go first"
    assert cache.cache_size <= cache.capacity_bytes
    assert list(cache.cache_state) == [(3, 2, 3), (4, 2, 3)]
    assert [1, 2, 3] not in cache
    with pytest.raises(ValueError, match="capacity_bytes"):
        baton.LlamaRAMCache(capacity_bytes=-1)


def test_a_completion_reuses_a_cached_prompt(model_path):
    with baton.Llama(model_path, n_ctx=512, n_threads=2, verbose=False) as llm:
        plain = llm(PROMPT, max_tokens=8, temperature=0)
        cache = baton.LlamaRAMCache()
        llm.set_cache(cache)
        first = llm(PROMPT, max_tokens=8, temperature=0)
        assert len(cache) == 1
        # Another sequence in between: the cached state is loaded back.
        llm.reset()
        llm.eval(llm.tokenize(b"Something else first."))
        second = llm(PROMPT, max_tokens=8, temperature=0)
        prompt_tokens = second["usage"]["prompt_tokens"]
        assert second["usage"]["prompt_tokens_details"]["cached_tokens"] == prompt_tokens - 1
        assert first["choices"][0]["text"] == second["choices"][0]["text"] == plain["choices"][0]["text"]
        llm.set_cache(None)
        assert llm.cache is None
