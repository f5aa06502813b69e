"""llama-cpp-python's README examples, run against Baton's `Llama`."""

import subprocess

import baton


def test_completion_example_has_llama_cpp_pythons_shape(llm):
    prompt = "Q: Name the planets in the solar system? A: "
    out = llm(prompt, max_tokens=32, stop=["Q:", "\n"], echo=True)
    assert set(out) >= {"id", "object", "created", "model", "choices", "usage"}
    assert out["object"] == "text_completion" and out["id"].startswith("cmpl-")
    (choice,) = out["choices"]
    assert choice["text"].startswith(prompt), "echo puts the prompt first"
    rest = choice["text"][len(prompt):]
    assert "\n" not in rest and "Q:" not in rest, "the stop strings end the text and are not sent"
    assert choice["finish_reason"] in ("stop", "length")
    usage = out["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert 0 < usage["completion_tokens"] <= 32


def test_chat_example_answers_as_the_assistant(llm):
    out = llm.create_chat_completion(
        messages=[
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "What is the capital of Germany?"},
        ],
        max_tokens=24,
        temperature=0,
    )
    assert out["object"] == "chat.completion" and out["id"].startswith("chatcmpl-")
    (choice,) = out["choices"]
    assert choice["message"]["role"] == "assistant"
    assert isinstance(choice["message"]["content"], str) and choice["message"]["content"]
    assert choice["finish_reason"] in ("stop", "length")
    assert out["usage"]["completion_tokens"] <= 24


def test_streamed_completion_is_the_whole_one_in_pieces(llm):
    whole = llm("Once upon a time", max_tokens=24, temperature=0)["choices"][0]
    chunks = list(llm("Once upon a time", max_tokens=24, temperature=0, stream=True))
    assert all(c["object"] == "text_completion" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1, "every chunk carries the completion's id"
    assert [c["choices"][0]["finish_reason"] for c in chunks[:-1]] == [None] * (len(chunks) - 1)
    assert chunks[-1]["choices"][0]["finish_reason"] == whole["finish_reason"]
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["text"]


def test_streamed_chat_sends_the_role_then_the_content(llm):
    messages = [{"role": "user", "content": "Name three colours."}]
    whole = llm.create_chat_completion(messages, max_tokens=20, temperature=0)["choices"][0]
    chunks = list(llm.create_chat_completion(messages, max_tokens=20, temperature=0, stream=True))
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == whole["message"]["content"]
    assert chunks[-1]["choices"][0]["delta"] == {}
    assert chunks[-1]["choices"][0]["finish_reason"] == whole["finish_reason"]


def test_greedy_text_is_baton_runs(llm, model_path, baton_bin):
    for prompt in ["Once upon a time", "The capital of France is", "def fibonacci(n):"]:
        run = subprocess.run(
            [baton_bin, "run", "-m", model_path, "-p", prompt, "-n", "24", "--temp", "0", "-t", "2", "-c", "512"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert run.stdout.startswith(prompt)
        expected = run.stdout[len(prompt):].removesuffix("\n")
        got = llm(prompt, max_tokens=24, temperature=0)["choices"][0]["text"]
        assert got == expected, f"{prompt!r}: Python gave {got!r}, baton run {expected!r}"


def test_a_layer_split_over_two_devices_gives_one_devices_text(llm, model_path):
    prompt = "The quick brown fox"
    one = llm(prompt, max_tokens=16, temperature=0)["choices"][0]["text"]
    with baton.Llama(model_path, devices=["cpu:0", "cpu:1"], split_mode="layer", n_threads=1, verbose=False) as two:
        assert two(prompt, max_tokens=16, temperature=0)["choices"][0]["text"] == one


def test_a_tensor_split_over_two_devices_generates(model_path):
    with baton.Llama(model_path, devices="cpu:0,cpu:1", split_mode="tensor", n_threads=1, verbose=False) as two:
        out = two("The quick brown fox", max_tokens=8, temperature=0)
    assert out["usage"]["completion_tokens"] >= 1 and out["choices"][0]["text"]


def test_known_models_are_listed():
    assert "smollm2-135m" in baton.known_models()


def test_json_object_response_format_gives_a_json_object(llm):
    import json

    out = llm.create_chat_completion(
        [{"role": "user", "content": "What is the capital of France? Answer in JSON."}],
        max_tokens=64,
        temperature=0,
        response_format={"type": "json_object"},
    )
    choice = out["choices"][0]
    assert choice["finish_reason"] == "stop", choice
    assert isinstance(json.loads(choice["message"]["content"]), dict)


def test_json_schema_response_formats_follow_the_schema(llm):
    import json

    schema = {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 30}, "population": {"type": "integer"}},
        "required": ["city", "population"],
        "additionalProperties": False,
    }
    messages = [{"role": "user", "content": "Describe Paris as JSON."}]
    # OpenAI's shape, and llama-cpp-python's ("json_object" with a schema).
    for form in ({"type": "json_schema", "json_schema": {"name": "city", "schema": schema}},
                 {"type": "json_object", "schema": schema}):
        out = llm.create_chat_completion(messages, max_tokens=64, temperature=0, response_format=form)
        choice = out["choices"][0]
        assert choice["finish_reason"] == "stop", choice
        value = json.loads(choice["message"]["content"])
        assert set(value) == {"city", "population"}, value
        assert isinstance(value["city"], str) and len(value["city"]) <= 30, value
        assert isinstance(value["population"], int), value
