#!/usr/bin/env python3
"""Independent reference for baton-gen's chat templates, on Python jinja2.

Renders conversations the way Hugging Face transformers renders chat
templates (`apply_chat_template`): a sandboxed jinja2 environment with
`trim_blocks` and `lstrip_blocks` on, the `loopcontrols` extension, a
`raise_exception` global, and the variables `messages`,
`add_generation_prompt`, `bos_token` and `eos_token`.

Reads a JSON request on stdin and writes the renderings as JSON on stdout:

    in:  {"gguf": "MODEL.gguf"}            template, BOS and EOS from the file
         or {"template": "...", "bos_token": "<s>", "eos_token": "</s>"}
         plus "cases": [{"messages": [{"role": ..., "content": ...}],
                         "add_generation_prompt": true}, ...]
    out: {"template": "...", "bos_token": ..., "eos_token": ...,
          "renders": ["...", ...]}

A case the template refuses (raise_exception) renders as
{"error": "message"}.

Usage (python: the one `bash scripts/setup-python.sh` prints):
    echo '{"gguf": "model.gguf", "cases": [...]}' | \\
        target/ref-venv/bin/python tests/reference/chat_template_ref.py
"""

import json
import sys

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment


class Refused(Exception):
    pass


def raise_exception(message):
    raise Refused(message)


def from_gguf(path):
    from gguf import GGUFReader

    reader = GGUFReader(path)

    def field(key):
        f = reader.fields.get(key)
        return None if f is None else f.contents()

    tokens = field("tokenizer.ggml.tokens")

    def text(key):
        token_id = field(key)
        return "" if token_id is None else tokens[token_id]

    return field("tokenizer.chat_template"), text("tokenizer.ggml.bos_token_id"), text("tokenizer.ggml.eos_token_id")


def main():
    request = json.load(sys.stdin)
    if "gguf" in request:
        template, bos, eos = from_gguf(request["gguf"])
        if template is None:
            sys.exit(f"{request['gguf']} has no tokenizer.chat_template")
    else:
        template, bos, eos = request["template"], request.get("bos_token", ""), request.get("eos_token", "")
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    compiled = env.from_string(template)
    renders = []
    for case in request["cases"]:
        try:
            renders.append(
                compiled.render(
                    messages=case["messages"],
                    add_generation_prompt=case.get("add_generation_prompt", False),
                    bos_token=bos,
                    eos_token=eos,
                )
            )
        except (Refused, TemplateError) as e:
            renders.append({"error": str(e)})
    json.dump({"template": template, "bos_token": bos, "eos_token": eos, "renders": renders}, sys.stdout)


if __name__ == "__main__":
    main()
