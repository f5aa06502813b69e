"""llama-index's LlamaCPP on Baton's `llama_cpp` shim (issue 48), run by
scripts/test-python-frameworks.sh (outside CI: llama-index adds to the
venv's install time what CI's budget keeps for langchain-community's
test, test_langchain.py)."""

import baton
from llama_index.core.llms import ChatMessage
from llama_index.llms.llama_cpp import LlamaCPP

PROMPT = "Q: Name the planets in the solar system? A: "


def test_llama_index_completes_streams_and_chats(model_path):
    llm = LlamaCPP(
        model_path=model_path,
        temperature=0,
        max_new_tokens=16,
        context_window=512,
        model_kwargs={"n_threads": 2},
        verbose=False,
    )
    assert isinstance(llm._model, baton.Llama)
    assert llm.metadata.context_window == 512
    whole = llm.complete(PROMPT, formatted=True)
    assert whole.text
    streamed = list(llm.stream_complete(PROMPT, formatted=True))
    assert streamed[-1].text == whole.text
    answer = llm.chat([ChatMessage(role="user", content="What is the capital of France?")])
    assert isinstance(answer.message.content, str) and answer.message.content
