"""Tools in the model's own call format (issue 47): the package renders a
chat as `baton serve` renders it, so a model whose template is not
Hermes's gets its calls held to, read back from and written back in its
own syntax. On the synthetic Gemma 4 file (`baton model synth`), whose
turns and call format are Gemma 4's (`<|tool_call>call:NAME{...}`)."""

import json
import subprocess

import pytest

import baton

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"enum": ["Oslo", "Lima"]}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
ASK = [{"role": "user", "content": "Weather in Oslo?"}]
CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}


@pytest.fixture(scope="module")
def gemma4(baton_bin, tmp_path_factory):
    path = tmp_path_factory.mktemp("gemma4") / "gemma4-f32.gguf"
    subprocess.run(
        [baton_bin, "model", "synth", "--shape", "gemma4", "--type", "f32", "-o", str(path)],
        check=True, capture_output=True,
    )
    with baton.Llama(str(path), n_ctx=1024, n_threads=2, verbose=False) as model:
        yield model


def _prompt(llm, messages, **fields):
    body = {"messages": messages, "parallel_tool_calls": False, "add_generation_prompt": True, **fields}
    tokens, plan = llm._model.chat(json.dumps(body))
    return llm.detokenize(tokens, special=True).decode("utf-8"), plan


def test_a_required_call_opens_in_the_models_own_syntax(gemma4):
    text, plan = _prompt(gemma4, ASK, tools=[WEATHER], tool_choice="required")
    assert plan is not None and plan.required
    assert text.endswith("<|turn>model\n<|tool_call>"), text[-80:]
    assert "<tool_call>" not in text, "no Hermes tags in a Gemma 4 prompt"


def test_a_required_call_comes_back_as_tool_calls(gemma4):
    # The random weights write what the grammar lets them: the city is one
    # of two, so the call closes within the tokens given.
    out = gemma4.create_chat_completion(ASK, tools=[WEATHER], tool_choice="required", temperature=0, max_tokens=64)
    choice = out["choices"][0]
    assert choice["finish_reason"] == "tool_calls", choice
    (call,) = choice["message"]["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    arguments = json.loads(call["function"]["arguments"])
    assert arguments == {"city": "Oslo"} or arguments == {"city": "Lima"}


def test_earlier_calls_and_results_are_written_in_the_models_syntax(gemma4):
    messages = ASK + [
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 3}'},
    ]
    text, plan = _prompt(gemma4, messages)
    assert plan is None
    assert '<|tool_call>call:get_weather{city:<|"|>Oslo<|"|>}<tool_call|>' in text, text
    assert "<|tool_response>response:get_weather{temp:3}<tool_response|>" in text, text
    assert "<tool_response>" not in text and "<tool_call>" not in text
    out = gemma4.create_chat_completion(messages, temperature=0, max_tokens=4)
    assert out["usage"]["prompt_tokens"] == len(gemma4._model.chat(json.dumps(
        {"messages": messages, "parallel_tool_calls": False, "add_generation_prompt": True}))[0])


def test_smollm2_keeps_the_hermes_form(llm):
    text, _ = _prompt(llm, ASK, tools=[WEATHER], tool_choice="required")
    assert text.rstrip().endswith("<tool_call>"), text[-80:]
