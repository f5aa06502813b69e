"""llama-cpp-python's README examples, through Baton's `llama_cpp` shim
(issue 48): each as its README writes it, with SmolLM2's path for the
model's. What Baton cannot apply is accepted and said (a UserWarning)."""

import json
import warnings

import pytest

from llama_cpp import Llama


@pytest.fixture
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


def test_high_level_completion(model_path, quiet):
    llm = Llama(model_path=model_path, n_gpu_layers=-1, seed=1337, n_ctx=2048)
    output = llm("Q: Name the planets in the solar system? A: ", max_tokens=32, stop=["Q:", "\n"], echo=True)
    assert output["choices"][0]["text"].startswith("Q: Name the planets in the solar system? A: ")
    assert output["object"] == "text_completion"


def test_from_pretrained_is_refused_saying_why():
    with pytest.raises(NotImplementedError, match="Hugging Face Hub"):
        Llama.from_pretrained(repo_id="Qwen/Qwen2-0.5B-Instruct-GGUF", filename="*q8_0.gguf", verbose=False)


def test_chat_completion(model_path, quiet):
    llm = Llama(model_path=model_path, chat_format="llama-2")
    out = llm.create_chat_completion(
        messages=[
            {"role": "system", "content": "You are an assistant who perfectly describes images."},
            {"role": "user", "content": "Describe this image in detail please."},
        ]
    )
    assert out["choices"][0]["message"]["role"] == "assistant"
    assert "chat_format='llama-2'" in " ".join(llm.unapplied), "the file's own template answered, and it is said"


def test_json_mode_and_json_schema_mode(model_path, quiet):
    # The README's, with a seed: at temperature 0.7 a random draw may run a
    # string until the context is full (about 1 run in 10 on SmolLM2), the
    # bound on JSON that issue 48's grammar engine item is about.
    llm = Llama(model_path=model_path, chat_format="chatml", seed=1337)
    out = llm.create_chat_completion(
        messages=[
            {"role": "system", "content": "You are a helpful assistant that outputs in JSON."},
            {"role": "user", "content": "Who won the world series in 2020"},
        ],
        response_format={"type": "json_object"},
        temperature=0.7,
    )
    assert isinstance(json.loads(out["choices"][0]["message"]["content"]), dict)
    out = llm.create_chat_completion(
        messages=[
            {"role": "system", "content": "You are a helpful assistant that outputs in JSON."},
            {"role": "user", "content": "Who won the world series in 2020"},
        ],
        response_format={
            "type": "json_object",
            "schema": {"type": "object", "properties": {"team_name": {"type": "string"}}, "required": ["team_name"]},
        },
        temperature=0.7,
    )
    assert isinstance(json.loads(out["choices"][0]["message"]["content"])["team_name"], str)


def test_function_calling(model_path, quiet):
    llm = Llama(model_path=model_path, chat_format="chatml-function-calling")
    out = llm.create_chat_completion(
        messages=[
            {
                "role": "system",
                "content": "A chat between a curious user and an artificial intelligence assistant. The assistant "
                "gives helpful, detailed, and polite answers to the user's questions. The assistant calls functions "
                "with appropriate input when necessary",
            },
            {"role": "user", "content": "Extract Jason is 25 years old"},
        ],
        tools=[
            {
                "type": "function",
                "function": {
                    "name": "UserDetail",
                    "parameters": {
                        "type": "object",
                        "title": "UserDetail",
                        "properties": {
                            "name": {"title": "Name", "type": "string"},
                            "age": {"title": "Age", "type": "integer"},
                        },
                        "required": ["name", "age"],
                    },
                },
            }
        ],
        tool_choice={"type": "function", "function": {"name": "UserDetail"}},
    )
    call = out["choices"][0]["message"]["tool_calls"][0]["function"]
    assert call["name"] == "UserDetail"
    arguments = json.loads(call["arguments"])
    assert isinstance(arguments["name"], str) and isinstance(arguments["age"], int)


def test_speculative_decoding_draft_model_drafts(model_path, quiet):
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    llama = Llama(model_path=model_path, draft_model=LlamaPromptLookupDecoding(num_pred_tokens=10))
    assert not any(note.startswith("draft_model=") for note in llama.unapplied)
    out = llama("Once upon a time", max_tokens=8)
    assert out["choices"][0]["finish_reason"] in ("stop", "length") and out["usage"]["completion_tokens"] <= 8


def test_embeddings(model_path, quiet):
    llm = Llama(model_path=model_path, embedding=True)
    embeddings = llm.create_embedding("Hello, world!")
    assert len(embeddings["data"][0]["embedding"]) > 0
    assert len(llm.embed(["Hello, world!", "Goodbye, world!"])) == 2


def test_adjusting_the_context_window(model_path, quiet):
    llm = Llama(model_path=model_path, n_ctx=2048)
    assert llm.n_ctx() == 2048


def test_the_low_level_api_is_refused_saying_why():
    import llama_cpp

    with pytest.raises(AttributeError, match="C API"):
        llama_cpp.llama_backend_init(False)
