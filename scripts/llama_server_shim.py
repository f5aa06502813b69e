#!/usr/bin/env python3
"""A `llama-server` that is `baton serve`: llama-server's own pytest suite
(tools/server/tests) starts it through LLAMA_SERVER_BIN_PATH. Its flags are
mapped to Baton's where the concept is the same; the model is always
BATON_SMOLLM2 (whatever --hf-repo/--hf-file/--model the test names), and
the flags Baton has no counterpart for are dropped, listed on stderr.

    LLAMA_SERVER_BIN_PATH=scripts/llama_server_shim.py BATON_BIN=... BATON_SMOLLM2=... pytest unit/

With LLAMA_SHIM_REFERENCE naming a real llama-server binary, that binary is
started instead, with every flag as the suite gave it except the model ones,
which name BATON_SMOLLM2 the same way (its tests then run on the same model
as Baton's: the baseline the Baton figures are compared with).
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
    "--tags": None,
    "--cors-origins": None,
    "--chat-template-file": None,
    "--chat-template": None,
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

# llama-server's flags without a value that Baton has too.
SWITCHES = ("--no-slots",)

# llama-server's context flags: its total over the slots, which Baton's -c
# (one sequence's) gets divided by --parallel.
CONTEXT_FLAGS = ("--ctx-size", "-c")

# llama-server's --reasoning-format values: Baton's.
REASONING = {"none": "none", "deepseek": "deepseek", "auto": "deepseek", "deepseek-legacy": "deepseek"}


# llama-server's flags that name a model to download or read: the reference
# gets BATON_SMOLLM2 in their place (a draft model too), or nothing (the
# projector: SmolLM2 has no vision tower).
MODEL_FLAGS = {
    "--hf-repo": "--model",
    "-hf": "--model",
    "--hf-file": None,
    "-hff": None,
    "--model": "--model",
    "-m": "--model",
    "--model-url": "--model",
    "-mu": "--model",
    "--model-draft": "--model-draft",
    "-md": "--model-draft",
    "--mmproj-url": None,
}


def reference(binary, model, argv):
    """The real llama-server on BATON_SMOLLM2 with the suite's other flags."""
    out = [binary]
    named = set()
    dropped = []
    i = 0
    while i < len(argv):
        flag = argv[i]
        value = argv[i + 1] if i + 1 < len(argv) else None
        if flag in MODEL_FLAGS and value is not None:
            mapped = MODEL_FLAGS[flag]
            if mapped is not None and mapped not in named:
                out += [mapped, model]
                named.add(mapped)
            i += 2
        elif missing_template(flag, value):
            dropped.append(f"{flag} {value} (no such file)")
            i += 2
        else:
            out.append(flag)
            i += 1
    start(out, dropped)


def missing_template(flag, value):
    """Whether `flag` names a chat template file that is not here (the
    sdist lacks llama.cpp's models/templates)."""
    return flag == "--chat-template-file" and value is not None and not os.path.isfile(value)


def start(command, dropped):
    """Says what was dropped, then becomes `command`."""
    if dropped:
        print(f"llama_server_shim: dropped {' '.join(dropped)}", file=sys.stderr, flush=True)
    os.execv(command[0], command)


def main(argv):
    if os.environ.get("LLAMA_SHIM_REFERENCE"):
        reference(os.environ["LLAMA_SHIM_REFERENCE"], os.environ["BATON_SMOLLM2"], argv)
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
        elif missing_template(flag, value):
            dropped.append(f"{flag} {value} (no such file)")
            i += 2
        elif flag in ("--n-predict", "-n") and value == "-1":
            # llama-server's "no limit": Baton's default.
            i += 2
        elif flag in SWITCHES:
            out.append(flag)
            i += 1
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
    start(out, dropped)


if __name__ == "__main__":
    main(sys.argv[1:])
