"""Talks to a running `baton serve` with the official `openai` client.

Usage: python openai_client.py BASE_URL   (e.g. http://127.0.0.1:8080/v1)

Checks chat and text completions, whole and streamed, stop strings, a seed
giving the same text twice, and usage counts; exits non-zero on the first
failure.
"""

import sys

import openai


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print(f"ok: {what}")


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
    try:
        client.completions.create(model="no-such-model", prompt="x", max_tokens=2)
        check(False, "an unknown model is refused")
    except openai.NotFoundError:
        check(True, "an unknown model is refused with 404")
    try:
        client.completions.create(model=model, prompt="x", max_tokens=2, presence_penalty=0.5)
        check(False, "a presence penalty is refused")
    except openai.BadRequestError:
        check(True, "a presence penalty is refused with 400")
    print("all openai client checks passed")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"FAILED: {e}", file=sys.stderr)
        sys.exit(1)
