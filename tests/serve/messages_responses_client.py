"""Talks to a running `baton serve` with the official `anthropic` client
(the Messages API) and the `openai` client's Responses API.

Usage: python messages_responses_client.py BASE_URL   (e.g. http://127.0.0.1:8080)

Checks messages whole and streamed (the SDK's own stream reader and its
final message), count_tokens, stop sequences, a tool call and its result
going back, an error the SDK raises as BadRequestError; then
responses.create whole and streamed, text.format with a JSON schema, a
function call and its output going back, and previous_response_id refused.
Exits non-zero on the first failure.
"""

import json
import sys

import anthropic
import jsonschema
import openai

from checks import check

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 40},
                   "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}


def check_messages(base):
    client = anthropic.Anthropic(base_url=base, api_key="none", max_retries=0, timeout=120)
    model = "local"  # any name is served
    messages = [{"role": "user", "content": "Name three colours."}]
    # anthropic 2.x's create() has no sampling arguments: sent as extra fields.
    zero = {"extra_body": {"temperature": 0}}
    greedy = dict(model=model, max_tokens=24, system="Be brief.", **zero)

    whole = client.messages.create(messages=messages, **greedy)
    text = "".join(b.text for b in whole.content if b.type == "text")
    check(whole.type == "message" and whole.role == "assistant", f"a message: {whole}")
    check(whole.stop_reason in ("end_turn", "max_tokens") and len(text) > 0, f"messages answers: {text!r}")
    check(whole.usage.input_tokens > 0 and 0 < whole.usage.output_tokens <= 24, f"usage {whole.usage}")
    counted = client.messages.count_tokens(model=model, messages=messages, system="Be brief.")
    check(counted.input_tokens == whole.usage.input_tokens, f"count_tokens {counted.input_tokens}")

    with client.messages.stream(messages=messages, **greedy) as stream:
        streamed = "".join(stream.text_stream)
        final = stream.get_final_message()
    check(streamed == text, "the streamed text equals the whole answer")
    check(final.stop_reason == whole.stop_reason and final.usage.output_tokens == whole.usage.output_tokens,
          f"the stream's final message: {final}")

    stop = text.split()[1] if len(text.split()) > 1 else text[2:4]
    cut = client.messages.create(messages=messages, stop_sequences=[stop], **greedy)
    check(cut.stop_reason == "stop_sequence" and cut.stop_sequence == stop, f"stop sequence {stop!r}: {cut}")

    tools = [{"name": "get_weather", "description": "The weather in a city", "input_schema": WEATHER}]
    ask = [{"role": "user", "content": "What is the weather like in Paris today?"}]
    called = client.messages.create(model=model, max_tokens=64, messages=ask, tools=tools,
                                    tool_choice={"type": "any"}, **zero)
    check(called.stop_reason == "tool_use", f"a tool_use: {called}")
    use = next(b for b in called.content if b.type == "tool_use")
    jsonschema.validate(use.input, WEATHER)
    with client.messages.stream(model=model, max_tokens=64, messages=ask, tools=tools,
                                tool_choice={"type": "any"}, **zero) as stream:
        final = stream.get_final_message()
    streamed_use = next(b for b in final.content if b.type == "tool_use")
    check(streamed_use.name == use.name and streamed_use.input == use.input, "the streamed call is the whole one")
    turn = ask + [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in called.content]},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                                "content": json.dumps({"temperature": 18})}]}]
    after = client.messages.create(model=model, max_tokens=16, messages=turn, tools=tools, **zero)
    check(after.usage.input_tokens > called.usage.input_tokens, "the tool result goes back")

    try:
        client.messages.create(model=model, max_tokens=8, messages=[{"role": "user", "content": [{"type": "video"}]}])
        check(False, "an unknown block type is refused")
    except anthropic.BadRequestError as e:
        check(e.status_code == 400 and "video" in str(e), f"an unknown block type is a BadRequestError: {e}")


def check_responses(base):
    client = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0, timeout=120)
    model = "gpt-4.1"
    greedy = dict(model=model, max_output_tokens=24, temperature=0, instructions="Be brief.")

    whole = client.responses.create(input="Name three colours.", **greedy)
    check(whole.status in ("completed", "incomplete") and len(whole.output_text) > 0,
          f"responses answers: {whole.output_text!r}")
    check(whole.usage.total_tokens == whole.usage.input_tokens + whole.usage.output_tokens, f"usage {whole.usage}")
    if whole.status == "incomplete":
        check(whole.incomplete_details.reason == "max_output_tokens", "incomplete by max_output_tokens")
    parts, done = [], None
    for event in client.responses.create(input="Name three colours.", stream=True, **greedy):
        if event.type == "response.output_text.delta":
            parts.append(event.delta)
        if event.type in ("response.completed", "response.incomplete"):
            done = event.response
    check("".join(parts) == whole.output_text, "the streamed text equals the whole answer")
    check(done is not None and done.output_text == whole.output_text, "the last event holds the response")

    schema = {"type": "object", "properties": {"colours": {"type": "array", "items": {"type": "string"},
                                                           "maxItems": 3}},
              "required": ["colours"], "additionalProperties": False}
    held = client.responses.create(model=model, input="Name three colours as JSON.", max_output_tokens=96,
                                   temperature=0,
                                   text={"format": {"type": "json_schema", "name": "colours", "schema": schema}})
    if held.status == "completed":
        jsonschema.validate(json.loads(held.output_text), schema)
    check(held.output_text.lstrip().startswith("{"), f"text.format holds the answer: {held.output_text!r}")

    tools = [{"type": "function", "name": "get_weather", "description": "The weather in a city",
              "parameters": WEATHER}]
    ask = [{"role": "user", "content": "What is the weather like in Paris today?"}]
    called = client.responses.create(model=model, input=ask, tools=tools, tool_choice="required",
                                     max_output_tokens=64, temperature=0)
    call = next(item for item in called.output if item.type == "function_call")
    jsonschema.validate(json.loads(call.arguments), WEATHER)
    check(call.name == "get_weather" and call.call_id.startswith("call_"), f"the call {call}")
    streamed = [e for e in client.responses.create(model=model, input=ask, tools=tools, tool_choice="required",
                                                   max_output_tokens=64, temperature=0, stream=True)
                if e.type == "response.function_call_arguments.done"]
    check(len(streamed) == 1 and streamed[0].arguments == call.arguments, "the streamed call is the whole one")
    turn = ask + [call.model_dump(exclude_none=True),
                  {"type": "function_call_output", "call_id": call.call_id, "output": json.dumps({"temperature": 18})}]
    after = client.responses.create(model=model, input=turn, tools=tools, max_output_tokens=16, temperature=0)
    check(after.usage.input_tokens > called.usage.input_tokens, "the function output goes back")

    try:
        client.responses.create(model=model, input="x", previous_response_id=whole.id)
        check(False, "previous_response_id is refused")
    except openai.BadRequestError as e:
        check(e.status_code == 400 and "previous_response_id" in str(e), f"previous_response_id is refused: {e}")


def main():
    base = sys.argv[1].rstrip("/")
    check_messages(base)
    check_responses(base)


if __name__ == "__main__":
    main()
