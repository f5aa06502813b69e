"""The rest of llama-cpp-python's public `Llama` members on baton.Llama
(issue 48): the figures, tokenizer object and helpers, and the members
that are llama.cpp's C objects, which Baton does not have."""

import numpy as np

import baton

# llama-cpp-python 0.3.36's public Llama members (inspect.getmembers of the
# class, names without a leading underscore), and those Baton leaves out:
# llama.cpp's ctypes context and model, and the answer as the `openai`
# package's types.
LLAMA_CPP_PYTHON_0_3_36_MEMBERS = (
    "close create_chat_completion create_chat_completion_openai_v1 create_completion create_embedding ctx "
    "detokenize embed eval eval_logits eval_tokens from_pretrained generate load_state logits_to_logprobs "
    "longest_token_prefix model n_ctx n_embd n_vocab pooling_type reset sample save_state set_cache set_seed "
    "token_bos token_eos token_nl tokenize tokenizer"
).split()
LEFT_OUT = {"ctx", "model", "create_chat_completion_openai_v1"}


def test_every_member_but_the_c_objects_is_there():
    missing = [name for name in LLAMA_CPP_PYTHON_0_3_36_MEMBERS if not hasattr(baton.Llama, name)]
    assert sorted(missing) == sorted(LEFT_OUT)


def test_figures_and_tokens(llm):
    assert llm.n_embd() == len(llm.embed("hi"))
    assert llm.detokenize([llm.token_nl()]) == b"\n"
    assert llm.pooling_type() == 1  # mean
    tok = llm.tokenizer()
    assert tok.decode(tok.encode("Hello, world!", add_bos=False)) == "Hello, world!"
    assert baton.Llama.longest_token_prefix([1, 2, 3], [1, 2, 4]) == 2


def test_logits_to_logprobs_is_a_log_softmax():
    logits = np.array([[1.0, 2.0, 3.0], [-np.inf, 0.0, 0.0]], dtype=np.single)
    out = baton.Llama.logits_to_logprobs(logits)
    assert out.dtype == np.single
    assert np.allclose(np.exp(out).sum(axis=-1), 1.0)
    assert out[1, 0] == -np.inf and np.isclose(out[1, 1], np.log(0.5))


def test_eval_tokens_and_eval_logits_are_deques_of_the_evaluated(llm):
    llm.reset()
    tokens = llm.tokenize(b"Hello there")
    llm.eval(tokens)
    assert list(llm.eval_tokens) == tokens
    assert len(llm.eval_logits) == 1 and len(llm.eval_logits[0]) == llm.n_vocab()
    llm.set_seed(7)
    assert llm._seed == 7
