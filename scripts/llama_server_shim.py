#!/usr/bin/env python3
"""A `llama-server` that is `baton serve`: llama-server's own pytest suite
(tools/server/tests) starts it through LLAMA_SERVER_BIN_PATH. Its flags are
mapped to Baton's where the concept is the same; the model is always
BATON_SMOLLM2 (whatever --hf-repo/--hf-file/--model the test names), and
the flags Baton has no counterpart for are dropped, listed on stderr.

    LLAMA_SERVER_BIN_PATH=scripts/llama_server_shim.py BATON_BIN=... BATON_SMOLLM2=... pytest unit/
"""

import os
import sys

# llama-server's flag: Baton's (None: the same name).
VALUE_FLAGS = {
    "--host": None,
    "--port": None,
    "--temp": None,
    "--seed": None,
    "--n-predict": None,
    "-n": "--n-predict",
    "--parallel": None,
    "-np": "--parallel",
    "--alias": None,
    "--cors-origins": None,
    "--chat-template-file": None,
    "--pooling": None,
    "--cache-ram": None,
    "--api-key": None,
    "--threads": "-t",
    "--batch-size": "-b",
    "-ctk": "--cache-type-k",
    "-ctv": "--cache-type-v",
    "--cache-type-k": None,
    "--cache-type-v": None,
}

# llama-server's context flags: its total over the slots, which Baton's -c
# (one sequence's) gets divided by --parallel.
CONTEXT_FLAGS = ("--ctx-size", "-c")

# llama-server's --reasoning-format values: Baton's.
REASONING = {"none": "none", "deepseek": "deepseek", "auto": "deepseek", "deepseek-legacy": "deepseek"}


def main(argv):
    baton = os.environ.get("BATON_BIN", "target/release/baton")
    model = os.environ["BATON_SMOLLM2"]
    out = [baton, "serve", "-m", model]
    dropped = []
    context = None
    parallel = 1
    for flag, value in zip(argv, argv[1:]):
        if flag in ("--parallel", "-np") and value.isdigit():
            parallel = max(1, int(value))
    i = 0
    while i < len(argv):
        flag = argv[i]
        value = argv[i + 1] if i + 1 < len(argv) else None
        takes_value = value is not None and not value.startswith("--") and not (value.startswith("-") and value[1:2].isalpha())
        if flag in CONTEXT_FLAGS and value is not None and value.isdigit():
            context = int(value)
            i += 2
        elif flag == "--chat-template-file" and value is not None and not os.path.isfile(value):
            # The sdist lacks llama.cpp's models/templates.
            dropped.append(f"{flag} {value} (no such file)")
            i += 2
        elif flag in VALUE_FLAGS and value is not None:
            out += [VALUE_FLAGS[flag] or flag, value]
            i += 2
        elif flag == "--reasoning-format" and value in REASONING:
            out += [flag, REASONING[value]]
            i += 2
        elif takes_value:
            dropped.append(f"{flag} {value}")
            i += 2
        else:
            dropped.append(flag)
            i += 1
    if context:
        out += ["-c", str(context // parallel)]
    if dropped:
        print(f"llama_server_shim: dropped {' '.join(dropped)}", file=sys.stderr, flush=True)
    os.execv(out[0], out)


if __name__ == "__main__":
    main(sys.argv[1:])
