"""langchain-community's llama.cpp classes on Baton's `llama_cpp` shim
(issue 48): LlamaCpp, ChatLlamaCpp (tools, structured output) and
LlamaCppEmbeddings construct and answer through baton.Llama, unchanged."""

import warnings

import pytest
from pydantic import BaseModel, Field

import baton
import llama_cpp

# langchain-community says on import that it is being sunset.
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langchain_community.chat_models import ChatLlamaCpp
    from langchain_community.embeddings import LlamaCppEmbeddings
    from langchain_community.llms import LlamaCpp
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool

PROMPT = "Q: Name the planets in the solar system? A: "


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


class Planet(BaseModel):
    """A planet of the solar system."""

    name: str = Field(description="its name")
    moons: int = Field(description="how many moons it has")


def test_the_shim_is_batons():
    assert llama_cpp.Llama is baton.Llama
    assert llama_cpp.LlamaGrammar is baton.LlamaGrammar
    with pytest.raises(AttributeError, match="C API"):
        llama_cpp.llama_backend_init


def test_llamacpp_invokes_and_streams_the_same_text(model_path):
    llm = LlamaCpp(model_path=model_path, n_ctx=512, n_threads=2, temperature=0, max_tokens=16, verbose=False)
    assert isinstance(llm.client, baton.Llama)
    text = llm.invoke(PROMPT)
    assert isinstance(text, str) and text
    assert "".join(llm.stream(PROMPT)) == text
    assert llm.get_num_tokens("hello world") == len(llm.client.tokenize(b"hello world"))
    assert llm.invoke(PROMPT, stop=["\n"]) == text.split("\n")[0]


def test_chat_llamacpp_answers_streams_and_calls_tools(model_path):
    chat = ChatLlamaCpp(model_path=model_path, n_ctx=1024, n_threads=2, temperature=0, max_tokens=48, verbose=False)
    answer = chat.invoke([HumanMessage("What is the capital of France?")])
    assert isinstance(answer.content, str) and answer.content
    streamed = "".join(chunk.content for chunk in chat.stream([HumanMessage("What is the capital of France?")]))
    assert streamed == answer.content
    bound = chat.bind_tools([get_weather], tool_choice={"type": "function", "function": {"name": "get_weather"}})
    ask = HumanMessage("What is the weather in Paris?")
    called = bound.invoke([ask])
    (call,) = called.tool_calls
    assert call["name"] == "get_weather" and isinstance(call["args"].get("city"), str)
    # The tool's result goes back as a ToolMessage; the model answers in words.
    result = ToolMessage(get_weather.invoke(call["args"]), tool_call_id=call["id"])
    final = chat.invoke([ask, called, result])
    assert isinstance(final.content, str) and final.content


def test_chat_llamacpp_structured_output_is_the_pydantic_model(model_path):
    chat = ChatLlamaCpp(model_path=model_path, n_ctx=1024, n_threads=2, temperature=0, max_tokens=64, verbose=False)
    planet = chat.with_structured_output(Planet).invoke("Describe Mars.")
    assert isinstance(planet, Planet) and isinstance(planet.moons, int)


def test_llamacpp_embeddings_embed_texts(model_path):
    embeddings = LlamaCppEmbeddings(model_path=model_path, n_ctx=512, n_threads=2, verbose=False)
    query = embeddings.embed_query("The sky is blue.")
    docs = embeddings.embed_documents(["The sky is blue.", "Grass is green."])
    assert len(docs) == 2 and len(query) == len(docs[0]) > 0
    assert all(isinstance(v, float) for v in query)
