"""Talks to a running `baton serve` with the official `openai` client.

Usage: python openai_client.py BASE_URL   (e.g. http://127.0.0.1:8080/v1)

Checks chat and text completions, whole and streamed, stop strings, a seed
giving the same text twice, usage counts and logprobs, then `GET /metrics` with the
Prometheus client's own parser; exits non-zero on the first failure.
"""

import json
import os
import sys
import urllib.request

import jsonschema
import openai
from prometheus_client.parser import text_string_to_metric_families

from checks import check


def main():
    base = sys.argv[1]
    client = openai.OpenAI(base_url=base, api_key="none", max_retries=0, timeout=120)
    model = client.models.list().data[0].id
    check(bool(model), f"the served model is {model!r}")

    messages = [{"role": "user", "content": "Name three colours."}]
    greedy = dict(model=model, temperature=0, max_tokens=24)

    # Chat, whole and streamed: the same greedy text.
    whole = client.chat.completions.create(messages=messages, **greedy)
    text = whole.choices[0].message.content
    check(whole.choices[0].finish_reason in ("stop", "length"), "chat finishes with stop or length")
    check(len(text) > 0, f"chat answers: {text!r}")
    u = whole.usage
    check(u.completion_tokens > 0 and u.total_tokens == u.prompt_tokens + u.completion_tokens, f"chat usage {u}")
    parts, finish = [], None
    stream = client.chat.completions.create(
        messages=messages, stream=True, stream_options={"include_usage": True}, **greedy
    )
    usage = None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.delta.content:
                parts.append(choice.delta.content)
            finish = choice.finish_reason or finish
    check("".join(parts) == text, "streamed chat equals the whole answer")
    check(finish == whole.choices[0].finish_reason, "streamed chat has the same finish_reason")
    check(usage is not None and usage.completion_tokens == u.completion_tokens, "the stream's usage chunk")

    # Completions, whole and streamed.
    prompt = "The capital of France is"
    done = client.completions.create(prompt=prompt, **greedy)
    ctext = done.choices[0].text
    check(len(ctext) > 0, f"completion answers: {ctext!r}")
    pieces = [c.choices[0].text for c in client.completions.create(prompt=prompt, stream=True, **greedy) if c.choices]
    check("".join(pieces) == ctext, "streamed completion equals the whole one")

    # A stop string from the middle of the greedy text.
    mid = len(ctext) // 2
    stop = ctext[mid : mid + 3]
    if stop.strip():
        cut = client.completions.create(prompt=prompt, stop=[stop], **greedy)
        check(cut.choices[0].text == ctext[: ctext.find(stop)], f"stop {stop!r} cuts the completion")
        check(cut.choices[0].finish_reason == "stop", "a stop string finishes with stop")
        streamed = "".join(
            c.choices[0].text
            for c in client.completions.create(prompt=prompt, stop=stop, stream=True, **greedy)
            if c.choices
        )
        check(streamed == ctext[: ctext.find(stop)], "a stop string cuts the streamed completion")

    # A seed gives the same text twice.
    seeded = dict(model=model, temperature=1.0, max_tokens=24, seed=42)
    a = client.chat.completions.create(messages=messages, **seeded).choices[0].message.content
    b = client.chat.completions.create(messages=messages, **seeded).choices[0].message.content
    check(a == b, "seed 42 gives the same chat text twice")

    # Errors come back as API errors the client raises.
    # One served model answers to any name (as llama-server; the OpenAI
    # client's examples send placeholders); --strict-model-name refuses.
    named = client.completions.create(model=model, prompt="x", max_tokens=2, temperature=0, seed=1)
    other = client.completions.create(model="gpt-3.5-turbo", prompt="x", max_tokens=2, temperature=0, seed=1)
    check(other.choices[0].text == named.choices[0].text, "another model name is served: the same greedy text")
    try:
        client.completions.create(model=model, prompt="x", max_tokens=2, presence_penalty=2.5)
        check(False, "a presence penalty past 2 is refused")
    except openai.BadRequestError:
        check(True, "a presence penalty past 2 is refused with 400")
    # A strong frequency penalty changes a greedy text that repeats itself.
    plain = client.completions.create(model=model, prompt="One, two, one, two, one,", max_tokens=16,
                                      temperature=0, seed=1).choices[0].text
    penalized = client.completions.create(model=model, prompt="One, two, one, two, one,", max_tokens=16,
                                          temperature=0, seed=1, frequency_penalty=2.0).choices[0].text
    check(plain != penalized, "frequency_penalty changes a repetitive greedy text")
    check_logprobs(client, model, messages, greedy)
    check_prefix_cache(client, messages, greedy)
    if os.environ.get("BATON_SERVE_OVER_RANKS") == "1":
        check_no_embeddings_over_ranks(client, model)
    else:
        check_embeddings(client, model)
    check_echo(client, model)
    check_json_object(client, model)
    check_json_schema(client, model)
    check_parse(client, model)
    check_tool_call(client, model)
    check_choices(client, model, messages)
    check_metrics(base.removesuffix("/v1"), generated_at_least=u.completion_tokens + 16)
    print("all openai client checks passed")


def check_logprobs(client, model, messages, greedy):
    """logprobs / top_logprobs on chat and completions, whole and streamed,
    in the shapes the client parses."""
    whole = client.chat.completions.create(messages=messages, logprobs=True, top_logprobs=3, **greedy)
    content = whole.choices[0].logprobs.content
    check(len(content) == whole.usage.completion_tokens, f"one logprobs entry per token ({len(content)})")
    text = b"".join(bytes(c.bytes) for c in content).decode("utf-8", "replace")
    check(text == whole.choices[0].message.content, "the entries' bytes spell the answer")
    tops = [[t.logprob for t in c.top_logprobs] for c in content]
    check(all(c.logprob <= 0 and len(t) == 3 and t == sorted(t, reverse=True) for c, t in zip(content, tops)),
          "every entry has 3 top_logprobs, most likely first")
    check(all(c.top_logprobs[0].token == c.token and c.top_logprobs[0].logprob == c.logprob for c in content),
          "greedy draws the most likely token every time")
    streamed = []
    for chunk in client.chat.completions.create(messages=messages, logprobs=True, top_logprobs=3, stream=True,
                                                **greedy):
        if chunk.choices and chunk.choices[0].logprobs:
            streamed.extend(chunk.choices[0].logprobs.content)
    check([(c.token, c.logprob) for c in streamed] == [(c.token, c.logprob) for c in content],
          "streamed chat logprobs equal the whole answer's")
    done = client.completions.create(model=model, prompt="The capital of France is", max_tokens=8, temperature=0,
                                     logprobs=2)
    lp, text = done.choices[0].logprobs, done.choices[0].text
    n = done.usage.completion_tokens
    check(len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == n, "completion logprobs per token")
    check("".join(lp.tokens) == text and lp.text_offset == sorted(lp.text_offset), "completion tokens and offsets")
    check(all(len(t) <= 2 and max(t.values()) <= 0 for t in lp.top_logprobs), "completion top_logprobs")
    try:
        client.chat.completions.create(messages=messages, logprobs=True, top_logprobs=21, **greedy)
        check(False, "top_logprobs past 20 is refused")
    except openai.BadRequestError:
        check(True, "top_logprobs past 20 is refused with 400")


def check_embeddings(client, model):
    """`/v1/embeddings` through the client: unit vectors of one width, the
    same text the same vector, in the order given."""
    texts = ["The cat sat on the mat.", "Quantum chromodynamics.", "The cat sat on the mat."]
    got = client.embeddings.create(model=model, input=texts)
    vectors = [d.embedding for d in sorted(got.data, key=lambda d: d.index)]
    check(len(vectors) == 3 and len({len(v) for v in vectors}) == 1 and len(vectors[0]) > 0,
          f"three embeddings of one width ({[len(v) for v in vectors]})")
    check(all(abs(sum(x * x for x in v) - 1) < 1e-4 for v in vectors), "embeddings have unit length")
    check(vectors[0] == vectors[2] and vectors[0] != vectors[1], "the same text gives the same embedding")
    check(got.usage.prompt_tokens > 0 and got.usage.total_tokens == got.usage.prompt_tokens, f"usage {got.usage}")


def check_no_embeddings_over_ranks(client, model):
    """Over MPI ranks, `/v1/embeddings` is refused with an error that says
    why, and the server goes on."""
    try:
        client.embeddings.create(model=model, input="hello")
        check(False, "embeddings are refused over ranks")
    except openai.APIError as e:
        check("over ranks" in str(e), f"the refusal says why: {e}")


def check_echo(client, model):
    """`echo` with `logprobs` and `max_tokens: 0`: the prompt scored, as an
    evaluation harness asks."""
    prompt = "The capital of France is Paris"
    got = client.completions.create(model=model, prompt=prompt, echo=True, logprobs=1, max_tokens=0)
    choice = got.choices[0]
    lp = choice.logprobs
    check(choice.text == prompt, f"echo sends the prompt back: {choice.text!r}")
    check(lp.token_logprobs[0] is None and all(v <= 0 for v in lp.token_logprobs[1:]),
          "the prompt's tokens are scored, the first with null")
    check(len(lp.tokens) == got.usage.prompt_tokens and got.usage.completion_tokens == 0, f"usage {got.usage}")
    more = client.completions.create(model=model, prompt=prompt, echo=True, max_tokens=4, temperature=0)
    check(more.choices[0].text.startswith(prompt) and len(more.choices[0].text) > len(prompt),
          "echo puts the prompt before the completion")


def check_json_object(client, model):
    """`response_format: json_object`: the answer parses as a JSON object."""
    got = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "What is the capital of France? Answer in JSON."}],
        max_tokens=64,
        temperature=0,
        response_format={"type": "json_object"},
    )
    text = got.choices[0].message.content
    check(got.choices[0].finish_reason == "stop", f"the JSON object closed: {text!r}")
    check(isinstance(json.loads(text), dict), f"the answer is a JSON object: {text!r}")


def check_json_schema(client, model):
    """`response_format: json_schema`: the answer validates against the
    schema (checked by the `jsonschema` package), whole and streamed."""
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 40},
            "country": {"type": "string", "maxLength": 40},
            "population": {"type": "integer"},
            "landmarks": {"type": "array", "items": {"type": "string", "maxLength": 40}, "maxItems": 3},
        },
        "required": ["city", "country", "population", "landmarks"],
        "additionalProperties": False,
    }
    form = {"type": "json_schema", "json_schema": {"name": "city", "strict": True, "schema": schema}}
    messages = [{"role": "user", "content": "Describe Paris as JSON."}]
    got = client.chat.completions.create(model=model, messages=messages, max_tokens=160, temperature=0,
                                         response_format=form)
    text = got.choices[0].message.content
    check(got.choices[0].finish_reason == "stop", f"the answer closed: {text!r}")
    jsonschema.validate(json.loads(text), schema)
    streamed = client.chat.completions.create(model=model, messages=messages, max_tokens=160, temperature=0,
                                              response_format=form, stream=True)
    check("".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == text,
          "the streamed answer is the whole one")
    try:
        client.chat.completions.create(model=model, messages=messages, max_tokens=4, response_format={
            "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "[a-"}}})
        check(False, "a pattern that is no regular expression is refused")
    except openai.BadRequestError as e:
        check("json_schema.schema" in str(e), f"the refusal names the schema: {e}")


def check_parse(client, model):
    """`beta.chat.completions.parse` with a pydantic model of the
    constraints people write (`Field(ge=0)`, a pattern, a datetime, a
    discriminated union): the client parses the answer into the model."""
    import datetime
    from typing import Literal, Union

    import pydantic

    class Cat(pydantic.BaseModel):
        kind: Literal["cat"]
        lives: int = pydantic.Field(ge=1, le=9)

    class Dog(pydantic.BaseModel):
        kind: Literal["dog"]
        good: bool

    class City(pydantic.BaseModel):
        name: str = pydantic.Field(max_length=40)
        code: str = pydantic.Field(pattern=r"^[A-Z]{3}$")
        population: int = pydantic.Field(ge=0)
        founded: datetime.datetime
        pet: Union[Cat, Dog] = pydantic.Field(discriminator="kind")

    completions = client.beta.chat.completions if hasattr(client, "beta") else client.chat.completions
    got = completions.parse(model=model, messages=[{"role": "user", "content": "Describe Paris as JSON."}],
                            max_tokens=200, temperature=0, response_format=City)
    choice = got.choices[0]
    check(choice.finish_reason == "stop", f"the answer closed: {choice.message.content!r}")
    city = choice.message.parsed
    check(isinstance(city, City), f"the client parsed a City: {choice.message.content!r}")
    check(city.population >= 0 and len(str(city.population)) <= 16, f"a bounded population: {city.population}")
    check(set(json.loads(choice.message.content)) == set(City.model_fields), "only the declared keys")
    try:
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": "x"}], max_tokens=4,
                                       extra_body={"grammar": "root ::= item"})
        check(False, "a GBNF grammar of an undefined rule is refused")
    except openai.BadRequestError as e:
        check("item" in str(e), f"the refusal names the rule: {e}")
    yes = client.completions.create(model=model, prompt="Is Paris in France?", max_tokens=8, temperature=0,
                                    extra_body={"grammar": 'root ::= ("yes" | "no") "."'})
    check(yes.choices[0].text in ("yes.", "no."), f"the grammar holds the answer: {yes.choices[0].text!r}")


def check_tool_call(client, model):
    """`tools` with `tool_choice: required`: the client parses the call, its
    arguments validate against the tool's parameters; the call and its
    result go back for the next turn."""
    parameters = {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 40},
                       "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"],
        "additionalProperties": False,
    }
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                               "parameters": parameters}}]
    messages = [{"role": "user", "content": "What is the weather like in Paris today?"}]
    got = client.chat.completions.create(model=model, messages=messages, tools=tools, tool_choice="required",
                                         max_tokens=64, temperature=0)
    choice = got.choices[0]
    check(choice.finish_reason == "tool_calls", f"a call: {choice}")
    call = choice.message.tool_calls[0]
    check(call.function.name == "get_weather" and call.id.startswith("call_"), f"the call {call}")
    arguments = json.loads(call.function.arguments)
    jsonschema.validate(arguments, parameters)
    streamed = client.chat.completions.create(model=model, messages=messages, tools=tools, tool_choice="required",
                                              max_tokens=64, temperature=0, stream=True)
    deltas = [c.choices[0].delta.tool_calls for c in streamed if c.choices and c.choices[0].delta.tool_calls]
    check(len(deltas) == 1 and deltas[0][0].function.arguments == call.function.arguments,
          f"the streamed call is the whole one: {deltas}")
    # parallel_tool_calls=False (LangChain's with_structured_output by
    # function_calling): the call stays held, one call.
    single = client.chat.completions.create(model=model, messages=messages, tools=tools, tool_choice="required",
                                            parallel_tool_calls=False, max_tokens=64, temperature=0)
    check(single.choices[0].finish_reason == "tool_calls" and len(single.choices[0].message.tool_calls) == 1,
          f"parallel_tool_calls=False answers one call: {single.choices[0]}")
    turn = messages + [choice.message.model_dump(exclude_none=True),
                       {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 18})}]
    after = client.chat.completions.create(model=model, messages=turn, tools=tools, max_tokens=24, temperature=0)
    check(after.choices[0].finish_reason in ("stop", "length", "tool_calls"), "the result goes back")


def check_choices(client, model, messages):
    """`n=3`: three choices indexed 0 to 2, the completions summed in the
    usage and the prompt counted once; streamed, each index's chunks."""
    sampled = dict(model=model, temperature=1.0, max_tokens=12, seed=7)
    one = client.chat.completions.create(messages=messages, **sampled)
    three = client.chat.completions.create(messages=messages, n=3, **sampled)
    check([c.index for c in three.choices] == [0, 1, 2], f"n=3 gives choices 0 to 2: {three.choices}")
    check(three.choices[0].message.content == one.choices[0].message.content, "the first choice is n=1's")
    check(three.usage.prompt_tokens == one.usage.prompt_tokens, "n=3 counts the prompt once")
    check(three.usage.completion_tokens <= 36 and three.usage.completion_tokens >= 3, f"summed: {three.usage}")
    texts = {}
    for chunk in client.completions.create(model=model, prompt="Once upon a time", n=2, max_tokens=8,
                                           temperature=1.0, seed=5, stream=True):
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + choice.text
    whole = client.completions.create(model=model, prompt="Once upon a time", n=2, max_tokens=8,
                                      temperature=1.0, seed=5)
    check([c.text for c in whole.choices] == [texts.get(0), texts.get(1)], f"n=2 streamed as whole: {texts}")
    try:
        client.completions.create(model=model, prompt="x", n=100, max_tokens=2)
        check(False, "n=100 is refused")
    except openai.BadRequestError:
        check(True, "n=100 is refused with 400")


def check_prefix_cache(client, messages, greedy):
    """A second chat turn reuses the first's keys and values (the slot's
    prefix cache): usage.prompt_tokens_details.cached_tokens covers at least
    the first turn's prompt."""
    first = client.chat.completions.create(messages=messages, **greedy)
    turn = messages + [{"role": "assistant", "content": first.choices[0].message.content},
                       {"role": "user", "content": "Now three more."}]
    second = client.chat.completions.create(messages=turn, **greedy)
    cached = second.usage.prompt_tokens_details.cached_tokens
    check(cached >= first.usage.prompt_tokens and cached < second.usage.prompt_tokens,
          f"the second turn takes {cached} of its {second.usage.prompt_tokens} prompt tokens from the cache")


def check_metrics(root, generated_at_least):
    """`GET /metrics` parsed by prometheus_client: the families and values
    that the requests above must have left."""
    with urllib.request.urlopen(f"{root}/metrics", timeout=30) as r:
        check(r.headers.get("Content-Type", "").startswith("text/plain; version=0.0.4"), "metrics content type")
        text = r.read().decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    value = lambda family, sample, **labels: next(
        s.value for s in families[family].samples if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()))
    for name, kind in [("baton_requests_running", "gauge"), ("baton_requests_queued", "gauge"),
                       ("baton_generated_tokens", "counter"), ("baton_prompt_tokens", "counter"),
                       ("baton_time_to_first_token_seconds", "histogram"),
                       ("baton_inter_token_latency_seconds", "histogram"), ("baton_kv_slots_free", "gauge"),
                       ("baton_steps", "counter"), ("baton_host_waits_per_step", "gauge"),
                       ("baton_prefix_cache_hit_ratio", "gauge")]:
        check(name in families and families[name].type == kind, f"/metrics has the {kind} {name}")
    check(value("baton_generated_tokens", "baton_generated_tokens_total") >= generated_at_least,
          "/metrics counts the generated tokens")
    ended = value("baton_requests_ended", "baton_requests_ended_total", reason="stop") + \
        value("baton_requests_ended", "baton_requests_ended_total", reason="length")
    ttft = value("baton_time_to_first_token_seconds", "baton_time_to_first_token_seconds_count")
    check(ended >= 8 and ttft >= ended - 1, f"/metrics: {ended} requests ended, {ttft} first tokens timed")
    buckets = [s.value for s in families["baton_inter_token_latency_seconds"].samples if s.name.endswith("_bucket")]
    check(buckets == sorted(buckets) and buckets[-1] > 0, "inter-token latency buckets are cumulative")
    check(value("baton_requests_running", "baton_requests_running") == 0, "nothing runs after the requests")
    check(0 < value("baton_prefix_cache_hit_ratio", "baton_prefix_cache_hit_ratio") < 1, "a prefix-cache hit ratio")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"FAILED: {e}", file=sys.stderr)
        sys.exit(1)
