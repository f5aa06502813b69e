"""Talks to a running `baton serve` whose chat template opens the thinking
(tests/serve/thinking-template.jinja) with the official clients: a
reasoning model's thinking, as `reasoning_content` on chat completions,
comes back as `thinking` content blocks on the Messages API (`anthropic`)
and as `reasoning` output items on the Responses API (`openai`), whole and
streamed through each SDK's own stream reader (which checks the events'
order and identities), the same text each way.

Usage: python reasoning_client.py BASE_URL   (e.g. http://127.0.0.1:8080)
Exits non-zero on the first failure.
"""

import sys

import anthropic
import openai

from checks import check

QUESTION = [{"role": "user", "content": "What is 2+2?"}]
# SmolLM2 answers it greedily in a few tokens and ends its turn (so the
# Responses stream completes), all of it inside the opened thinking.
TOKENS = 64


def chat_reasoning(base):
    """The greedy chat answer's reasoning_content and content."""
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="none", max_retries=0, timeout=120)
    answer = client.chat.completions.create(model="local", messages=QUESTION, max_tokens=TOKENS, temperature=0)
    message = answer.choices[0].message
    reasoning = (message.model_extra or {}).get("reasoning_content") or ""
    check(len(reasoning) > 0 and answer.choices[0].finish_reason == "stop",
          f"chat completions give reasoning_content and end: {answer}")
    return reasoning, message.content or ""


def check_messages(base, reasoning, content):
    client = anthropic.Anthropic(base_url=base, api_key="none", max_retries=0, timeout=120)
    greedy = dict(model="local", max_tokens=TOKENS, messages=QUESTION, extra_body={"temperature": 0})
    whole = client.messages.create(**greedy)
    kinds = [block.type for block in whole.content]
    check(kinds[:1] == ["thinking"], f"a thinking block first: {kinds}")
    check(whole.content[0].thinking == reasoning, "the thinking block is chat's reasoning_content")
    text = "".join(block.text for block in whole.content if block.type == "text")
    check(text == content, "the text block is chat's content")
    with client.messages.stream(**greedy) as stream:
        thought = "".join(event.thinking for event in stream if event.type == "thinking")
        final = stream.get_final_message()
    check(thought == reasoning, "thinking_delta events stream the same thinking")
    check([b.type for b in final.content] == kinds and final.content[0].thinking == reasoning,
          f"the stream's final message has the same blocks: {final.content}")


def check_responses(base, reasoning, content):
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="none", max_retries=0, timeout=120)
    greedy = dict(model="local", input="What is 2+2?", max_output_tokens=TOKENS, temperature=0)
    whole = client.responses.create(**greedy)
    kinds = [item.type for item in whole.output]
    check(kinds[:1] == ["reasoning"], f"a reasoning item first: {kinds}")
    check(whole.output[0].content[0].text == reasoning, "the reasoning item is chat's reasoning_content")
    check(whole.output_text == content, "the message is chat's content")
    with client.responses.stream(**greedy) as stream:
        thought = "".join(e.delta for e in stream if e.type == "response.reasoning_text.delta")
        final = stream.get_final_response()
    check(thought == reasoning, "response.reasoning_text.delta events stream the same thinking")
    check([item.type for item in final.output] == kinds and final.output[0].content[0].text == reasoning,
          f"the stream's final response has the same items: {final.output}")


def main():
    base = sys.argv[1].rstrip("/")
    reasoning, content = chat_reasoning(base)
    check_messages(base, reasoning, content)
    check_responses(base, reasoning, content)
    print("reasoning_client: passed")


if __name__ == "__main__":
    main()
