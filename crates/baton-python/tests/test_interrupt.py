"""Stopping a generation early (Ctrl-C, a closed stream) frees its sequence
and leaves the model usable."""

import _thread
import threading

import pytest


def test_keyboard_interrupt_stops_a_generation_and_the_model_goes_on(llm):
    expected = llm("Once upon a time", max_tokens=8, temperature=0)["choices"][0]["text"]
    prompt = llm.tokenize(b"Once upon a time")
    # Far more tokens than 0.3 s gives: the interrupt lands mid-generation,
    # while `__next__` waits in Rust with the GIL released.
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            llm(prompt, max_tokens=llm.n_ctx() - len(prompt), temperature=0, repeat_penalty=1.0)
    finally:
        timer.cancel()
    assert llm("Once upon a time", max_tokens=8, temperature=0)["choices"][0]["text"] == expected


def test_a_stream_closed_early_leaves_the_model_usable(llm):
    expected = llm("The sky is", max_tokens=8, temperature=0)["choices"][0]["text"]
    stream = llm("The sky is", max_tokens=400, temperature=0, stream=True)
    next(stream)
    next(stream)
    stream.close()
    assert llm("The sky is", max_tokens=8, temperature=0)["choices"][0]["text"] == expected


def test_calls_from_two_threads_share_the_engine(model_path):
    import baton

    with baton.Llama(model_path, n_threads=2, n_parallel=2, verbose=False) as llm:
        expected = llm("Once upon a time", max_tokens=16, temperature=0)["choices"][0]["text"]
        results = []

        def run():
            results.append(llm("Once upon a time", max_tokens=16, temperature=0)["choices"][0]["text"])

        threads = [threading.Thread(target=run) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert results == [expected, expected], "batched sequences give the bits of one alone"


def test_keyboard_interrupt_stops_a_long_eval_and_the_session_goes_on(model_path):
    import baton

    with baton.Llama(model_path, n_ctx=4096, n_batch=16, n_threads=2, verbose=False) as llm:
        tokens = llm.tokenize(b"Once upon a time")
        llm.eval(tokens)
        expected = llm.scores[0].copy()
        llm.reset()
        # 4000 tokens, 250 batches: the interrupt lands between two of them.
        timer = threading.Timer(0.3, _thread.interrupt_main)
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                llm.eval(tokens + [tokens[-1]] * 4000)
        finally:
            timer.cancel()
        assert llm.n_tokens == 0, "an interrupted eval does not advance n_tokens"
        llm.eval(tokens)
        assert (llm.scores[0] == expected).all()
