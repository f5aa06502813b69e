#!/usr/bin/env python3
"""Greedy decode speed through Baton's Python package against `baton run`
and llama-cpp-python's `Llama` on the same file and threads, alternating
rounds, each run in a fresh process (scripts/bench-python.sh sets it up).

Each engine generates N tokens after the same prompt; the figure is decode
tokens/s from the first generated token to the last (the prompt's
evaluation left out), as `baton run` reports its generation rate. Prints
every round and the medians with their ratios to `baton run`.
"""

import argparse
import json
import re
import statistics
import subprocess
import sys

STREAM_RATE = r"""
import json, sys, time
{setup}
times = []
for chunk in llm(PROMPT, max_tokens=N, temperature=0, top_k=1, stream=True):
    if chunk["choices"][0]["text"]:
        times.append(time.perf_counter())
n = len(times)
print(json.dumps({{"tokens": n, "tps": (n - 1) / (times[-1] - times[0])}}))
"""

BATON_SETUP = "import baton\nllm = baton.Llama(MODEL, n_ctx=CTX, n_threads=T, verbose=False)"
REFERENCE_SETUP = "import llama_cpp\nllm = llama_cpp.Llama(MODEL, n_ctx=CTX, n_threads=T, n_threads_batch=T, verbose=False)"


def python_rate(python: str, setup: str, args) -> dict:
    head = f"MODEL={args.model!r}\nPROMPT={args.prompt!r}\nN={args.n}\nCTX={args.ctx}\nT={args.threads}\n"
    code = head + STREAM_RATE.format(setup=setup)
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def baton_run_rate(args) -> dict:
    cmd = [args.baton, "run", "-m", args.model, "-p", args.prompt, "-n", str(args.n), "--temp", "0",
           "-t", str(args.threads), "-c", str(args.ctx)]
    err = subprocess.run(cmd, capture_output=True, text=True, check=True).stderr
    m = re.search(r"generation: (\d+) tokens, ([\d.]+) t/s", err)
    if not m:
        sys.exit(f"no generation figure in baton run's output:\n{err}")
    return {"tokens": int(m.group(1)), "tps": float(m.group(2))}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baton", required=True, help="the baton binary")
    p.add_argument("--baton-python", required=True, help="a Python with the baton wheel installed")
    p.add_argument("--reference-python", help="a Python with llama-cpp-python installed (optional)")
    p.add_argument("--model", required=True)
    p.add_argument("-n", type=int, default=128)
    p.add_argument("-r", "--rounds", type=int, default=3)
    p.add_argument("-t", "--threads", type=int, default=2)
    p.add_argument("--ctx", type=int, default=512)
    p.add_argument("--prompt", default="Once upon a time, in a small village by the sea,")
    args = p.parse_args()

    engines = [("baton run", lambda: baton_run_rate(args)),
               ("baton.Llama (Python)", lambda: python_rate(args.baton_python, BATON_SETUP, args))]
    if args.reference_python:
        engines.append(("llama_cpp.Llama (reference)", lambda: python_rate(args.reference_python, REFERENCE_SETUP, args)))
    rates = {name: [] for name, _ in engines}
    for r in range(args.rounds):
        for name, measure in engines:
            got = measure()
            rates[name].append(got["tps"])
            print(f"round {r + 1}: {name}: {got['tokens']} tokens, {got['tps']:.1f} t/s", flush=True)
    base = statistics.median(rates["baton run"])
    print(f"\n| engine | median decode t/s ({args.rounds} rounds, {args.threads} threads) | ratio to baton run |")
    print("| --- | ---: | ---: |")
    for name, values in rates.items():
        med = statistics.median(values)
        print(f"| {name} | {med:.1f} | {med / base:.3f}x |")


if __name__ == "__main__":
    main()
