"""Tools on create_chat_completion, LlamaGrammar, logit_bias and the
session-run hooks on chats (issue 48): llama-cpp-python's shapes, with
decoding held as `baton serve` holds it."""

import json

import numpy as np
import pytest

import baton

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def test_a_required_tool_call_comes_back_as_tool_calls(llm):
    out = llm.create_chat_completion(ASK, tools=[WEATHER], tool_choice="required", temperature=0, max_tokens=64)
    (choice,) = out["choices"]
    assert choice["finish_reason"] == "tool_calls"
    message = choice["message"]
    assert message["role"] == "assistant" and message["content"] is None
    (call,) = message["tool_calls"]
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"]["name"] == "get_weather"
    arguments = json.loads(call["function"]["arguments"])
    assert set(arguments) == {"city"} and isinstance(arguments["city"], str)


def test_a_named_tool_choice_streams_its_call(llm):
    choice = {"type": "function", "function": {"name": "get_weather"}}
    chunks = list(llm.create_chat_completion(ASK, tools=[WEATHER], tool_choice=choice, temperature=0, max_tokens=64, stream=True))
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
    calls = [c["choices"][0]["delta"]["tool_calls"] for c in chunks if "tool_calls" in c["choices"][0]["delta"]]
    assert len(calls) == 1 and calls[0][0]["index"] == 0
    assert calls[0][0]["function"]["name"] == "get_weather"
    json.loads(calls[0][0]["function"]["arguments"])
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_a_tool_result_goes_back_into_the_conversation(llm):
    first = llm.create_chat_completion(ASK, tools=[WEATHER], tool_choice="required", temperature=0, max_tokens=64)
    call = first["choices"][0]["message"]["tool_calls"][0]
    messages = ASK + [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": '{"temperature_c": 21}'},
    ]
    out = llm.create_chat_completion(messages, tools=[WEATHER], tool_choice="none", temperature=0, max_tokens=24)
    assert out["choices"][0]["finish_reason"] in ("stop", "length")
    assert isinstance(out["choices"][0]["message"]["content"], str)
    # The call and its result are in the prompt (the tools are not: "none").
    plain = llm.create_chat_completion(ASK, temperature=0, max_tokens=1)
    assert out["usage"]["prompt_tokens"] > plain["usage"]["prompt_tokens"] + 10


def test_legacy_functions_are_tools(llm):
    out = llm.create_chat_completion(
        ASK, functions=[WEATHER["function"]], function_call={"name": "get_weather"}, temperature=0, max_tokens=64
    )
    assert out["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"


def test_bad_tools_are_value_errors(llm):
    with pytest.raises(ValueError, match="no tool is named"):
        llm.create_chat_completion(ASK, tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "nope"}})
    with pytest.raises(ValueError, match="response_format"):
        llm.create_chat_completion(ASK, tools=[WEATHER], response_format={"type": "json_object"})
    with pytest.raises(ValueError, match="only assistant messages"):
        llm.create_chat_completion([{"role": "user", "content": "x", "tool_calls": [{"function": {"name": "f"}}]}])


SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "moons": {"type": "integer"}},
    "required": ["name", "moons"],
    "additionalProperties": False,
}


def test_a_json_schema_grammar_holds_completions_and_chats(llm):
    grammar = baton.LlamaGrammar.from_json_schema(json.dumps(SCHEMA))
    out = llm("Describe Mars as JSON: ", grammar=grammar, temperature=0, max_tokens=64)
    value = json.loads(out["choices"][0]["text"])
    assert set(value) == {"name", "moons"} and isinstance(value["moons"], int)
    chat = llm.create_chat_completion(
        [{"role": "user", "content": "Describe Mars as JSON."}], grammar=grammar, temperature=0, max_tokens=64
    )
    assert set(json.loads(chat["choices"][0]["message"]["content"])) == {"name", "moons"}
    # On the session too (a logits processor takes that path): the same text.
    keep = baton.LogitsProcessorList([lambda ids, scores: scores])
    local = llm("Describe Mars as JSON: ", grammar=grammar, temperature=0, max_tokens=64, logits_processor=keep)
    assert local["choices"][0]["text"] == out["choices"][0]["text"]
    assert local["choices"][0]["finish_reason"] == "stop"


def test_a_gbnf_grammar_holds_completions_and_generate(llm):
    grammar = baton.LlamaGrammar.from_string('root ::= ("yes" | "no") "."')
    out = llm("Is the sky blue? Answer: ", grammar=grammar, max_tokens=8, temperature=0.8, seed=3)
    assert out["choices"][0]["text"] in ("yes.", "no."), out
    assert out["choices"][0]["finish_reason"] == "stop"
    # The session (a logits processor takes that path) holds it too.
    keep = baton.LogitsProcessorList([lambda ids, scores: scores])
    local = llm("Is the sky blue? Answer: ", grammar=grammar, max_tokens=8, temperature=0, logits_processor=keep)
    assert local["choices"][0]["text"] in ("yes.", "no."), local
    drawn = []
    for token in llm.generate(llm.tokenize(b"Is it? "), grammar=grammar, temp=0):
        if token == llm.token_eos() or len(drawn) == 8:
            break
        drawn.append(token)
    assert llm.detokenize(drawn).decode() in ("yes.", "no.", "yes", "no"), drawn
    with pytest.raises(ValueError, match="grammar"):
        baton.LlamaGrammar.from_string('root ::= "unclosed')
    with pytest.raises(ValueError, match="type"):
        llm("x", grammar=baton.LlamaGrammar.from_json_schema('{"type": 3}'), max_tokens=2)
    with pytest.raises(TypeError, match="LlamaGrammar"):
        llm("x", grammar="root ::= x", max_tokens=2)


def test_logit_bias_bans_a_token(llm):
    tokens = llm.tokenize(b"Q: Name the planets in the solar system? A: ")
    first = llm(tokens, max_tokens=1, temperature=0)["choices"][0]["text"]
    (banned,) = llm.tokenize(first.encode(), add_bos=False)[:1]
    out = llm(tokens, max_tokens=1, temperature=0, logit_bias={banned: -np.inf})
    assert out["choices"][0]["text"] != first


def test_a_chat_stops_at_a_stopping_criterion(llm):
    n = []

    def two(input_ids, logits):
        n.append(len(input_ids))
        return len(n) > 2

    out = llm.create_chat_completion(ASK, temperature=0, max_tokens=30, stopping_criteria=baton.StoppingCriteriaList([two]))
    assert out["usage"]["completion_tokens"] == 2
    assert out["choices"][0]["finish_reason"] == "stop"
    assert out["object"] == "chat.completion"
