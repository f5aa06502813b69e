"""The dicts ``Llama`` returns have the shapes ``baton serve`` sends for the
same answer: the same keys, nested the same way, with values of the same
types (both are built by baton-gen's ``openai``)."""

import json
import socket
import subprocess
import time
import urllib.request

import pytest


def shape(value, key=None):
    """The keys and nesting of a JSON value, its leaves replaced by their
    types; a completion's ``top_logprobs`` maps token texts, so only its
    values' shapes count; a list is the set of its items' shapes."""
    if isinstance(value, dict):
        if key == "top_logprobs":
            return ("map", tuple(sorted({repr(shape(v)) for v in value.values()})))
        return {k: shape(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return ("list", tuple(sorted({repr(shape(v)) for v in value})))
    return type(value).__name__


@pytest.fixture(scope="module")
def server(model_path, baton_bin):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen(
        [baton_bin, "serve", "-m", model_path, "--port", str(port), "-t", "2", "-c", "512"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{url}/v1/models", timeout=5).read()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("baton serve did not start")
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def post(url, path, body):
    request = urllib.request.Request(
        url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        raw = response.read().decode()
    if not body.get("stream"):
        return json.loads(raw)
    events = [line[len("data: "):] for line in raw.split("\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


def assert_same_shape(ours, theirs, what):
    assert shape(ours) == shape(theirs), f"{what}: Python {json.dumps(ours)}\nserver {json.dumps(theirs)}"


def assert_same_stream(ours, theirs, what):
    assert_same_shape(ours[-1], theirs[-1], f"{what}, last chunk")
    middle = lambda chunks: {repr(shape(c)) for c in chunks[1:-1]}
    assert middle(ours) == middle(theirs), what


PROMPT = "The capital of France is"
MESSAGES = [{"role": "user", "content": "Say hi."}]


def test_a_completion_has_the_servers_shape(llm, server):
    ours = llm(PROMPT, max_tokens=6, temperature=0, logprobs=2)
    theirs = post(server, "/v1/completions", {"prompt": PROMPT, "max_tokens": 6, "temperature": 0, "logprobs": 2})
    assert_same_shape(ours, theirs, "completion")
    ours = llm(PROMPT, max_tokens=3, temperature=0, logprobs=2, echo=True)
    body = {"prompt": PROMPT, "max_tokens": 3, "temperature": 0, "logprobs": 2, "echo": True}
    assert_same_shape(ours, post(server, "/v1/completions", body), "echoed completion")
    assert_same_shape(llm(PROMPT, max_tokens=3), post(server, "/v1/completions", {"prompt": PROMPT, "max_tokens": 3}), "plain")


def test_a_streamed_completion_has_the_servers_shape(llm, server):
    body = {"prompt": PROMPT, "max_tokens": 6, "temperature": 0, "logprobs": 2, "stream": True}
    ours = list(llm(PROMPT, max_tokens=6, temperature=0, logprobs=2, stream=True))
    theirs = post(server, "/v1/completions", body)
    assert_same_shape(ours[0], theirs[0], "first chunk")
    assert_same_stream(ours, theirs, "completion stream")


def test_a_chat_completion_has_the_servers_shape(llm, server):
    ours = llm.create_chat_completion(MESSAGES, max_tokens=4, temperature=0, logprobs=True, top_logprobs=2)
    body = {"messages": MESSAGES, "max_tokens": 4, "temperature": 0, "logprobs": True, "top_logprobs": 2}
    assert_same_shape(ours, post(server, "/v1/chat/completions", body), "chat")
    ours = llm.create_chat_completion(MESSAGES, max_tokens=4)
    assert_same_shape(ours, post(server, "/v1/chat/completions", {"messages": MESSAGES, "max_tokens": 4}), "plain chat")


def test_a_streamed_chat_has_the_servers_shape(llm, server):
    kwargs = {"max_tokens": 4, "temperature": 0, "logprobs": True, "top_logprobs": 2}
    ours = list(llm.create_chat_completion(MESSAGES, stream=True, **kwargs))
    theirs = post(server, "/v1/chat/completions", {"messages": MESSAGES, "stream": True, **kwargs})
    # The opening chunk: the server sends `content: null` with the role (as
    # llama-server; OpenAI's sends ""), llama-cpp-python the role alone; the
    # rest is the same.
    assert theirs[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    assert ours[0]["choices"][0]["delta"] == {"role": "assistant"}
    theirs[0]["choices"][0]["delta"].pop("content")
    assert_same_shape(ours[0], theirs[0], "opening chunk")
    assert_same_stream(ours, theirs, "chat stream")
