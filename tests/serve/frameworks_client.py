"""Talks to a running `baton serve` through the frameworks that agents and
applications put over the OpenAI API, each as its users call it:

- instructor, Mode.TOOLS (the answer a forced tool call) and
  Mode.JSON_SCHEMA (response_format json_schema), into a pydantic model
  with the constraints people write (`Field(ge=0)`, a pattern, a length);
- LangChain's ChatOpenAI: invoke, stream (the same text), bind_tools with a
  ToolMessage round trip, with_structured_output by json_schema and by
  function_calling (which sends parallel_tool_calls false and a named
  tool_choice, and whose schema has `minimum` and `pattern`);
- litellm: completion whole and streamed (the same text), and a tool call.

Usage: python frameworks_client.py BASE_URL   (e.g. http://127.0.0.1:8080/v1)
Prints a line per client and what passed; exits non-zero if one failed.
"""

import json
import os
import sys
import traceback

# litellm would fetch its model price list from the network at import.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from pydantic import BaseModel, Field  # noqa: E402

from checks import check  # noqa: E402


class City(BaseModel):
    """A city."""

    name: str = Field(max_length=24)
    population: int = Field(ge=0)
    country: str = Field(pattern="^[A-Z]{2}$")


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather of a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 24},
                           "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"],
        },
    },
}
ASK_CITY = [{"role": "user", "content": "Describe Paris as a city record."}]
GREETING = [{"role": "user", "content": "Say hello in five words."}]
TOKENS = 160


def is_city(value):
    return isinstance(value, City) and value.population >= 0 and len(value.country) == 2


def instructor_modes(base):
    import instructor
    import openai

    raw = openai.OpenAI(base_url=base, api_key="none", max_retries=0, timeout=120)
    for mode in (instructor.Mode.TOOLS, instructor.Mode.JSON_SCHEMA):
        client = instructor.from_openai(raw, mode=mode)
        city = client.chat.completions.create(
            model="local", response_model=City, messages=ASK_CITY, max_tokens=TOKENS, temperature=0, max_retries=0
        )
        check(is_city(city), f"instructor {mode.name}: {city!r}")


def langchain_chat(base):
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_openai import ChatOpenAI

    def chat(tokens):
        return ChatOpenAI(base_url=base, api_key="none", model="local", temperature=0, max_tokens=tokens, max_retries=0)

    said = chat(24).invoke(GREETING[0]["content"])
    check(isinstance(said.content, str) and said.content, f"ChatOpenAI.invoke: {said.content!r}")
    streamed = "".join(chunk.content for chunk in chat(24).stream(GREETING[0]["content"]))
    check(streamed == said.content, f"ChatOpenAI.stream gives the same text: {streamed!r}")

    long = chat(TOKENS)
    for method in ("json_schema", "function_calling"):
        city = long.with_structured_output(City, method=method).invoke(ASK_CITY[0]["content"])
        check(is_city(city), f"with_structured_output(method={method!r}): {city!r}")

    question = HumanMessage("What is the weather in Oslo, in celsius?")
    called = long.bind_tools([WEATHER], tool_choice="get_weather").invoke([question])
    check(len(called.tool_calls) == 1 and called.tool_calls[0]["name"] == "get_weather",
          f"bind_tools: one call of get_weather: {called.tool_calls}")
    call = called.tool_calls[0]
    check(call["args"].get("unit") in ("celsius", "fahrenheit"), f"its arguments follow the schema: {call['args']}")
    result = ToolMessage(content=json.dumps({"temperature": 3}), tool_call_id=call["id"])
    answer = long.bind_tools([WEATHER], tool_choice="none").invoke([question, called, result])
    check(isinstance(answer.content, str) and not answer.tool_calls, f"a ToolMessage round trip: {answer.content!r}")


def litellm_calls(base):
    import litellm

    common = dict(model="openai/local", api_base=base, api_key="none", temperature=0, max_tokens=24)
    whole = litellm.completion(messages=GREETING, **common)
    text = whole.choices[0].message.content
    check(isinstance(text, str) and text, f"litellm.completion: {text!r}")
    streamed = "".join(chunk.choices[0].delta.content or "" for chunk in litellm.completion(
        messages=GREETING, stream=True, **common))
    check(streamed == text, f"litellm streamed gives the same text: {streamed!r}")
    common["max_tokens"] = TOKENS
    called = litellm.completion(
        messages=[{"role": "user", "content": "Weather in Oslo?"}], tools=[WEATHER],
        tool_choice={"type": "function", "function": {"name": "get_weather"}}, **common)
    calls = called.choices[0].message.tool_calls or []
    check(len(calls) == 1 and calls[0].function.name == "get_weather", f"litellm tool call: {calls}")
    arguments = json.loads(calls[0].function.arguments)
    check(arguments.get("unit") in ("celsius", "fahrenheit"), f"its arguments follow the schema: {arguments}")


def main():
    base = sys.argv[1].rstrip("/")
    failed = []
    for name, run in (("instructor", instructor_modes), ("langchain ChatOpenAI", langchain_chat),
                      ("litellm", litellm_calls)):
        try:
            run(base)
            print(f"frameworks_client: {name} passed")
        except Exception:  # noqa: BLE001 - every client is tried, each failure printed
            traceback.print_exc()
            print(f"frameworks_client: {name} FAILED")
            failed.append(name)
    if failed:
        sys.exit(f"frameworks_client: failed: {', '.join(failed)}")
    print("frameworks_client: passed")


if __name__ == "__main__":
    main()
