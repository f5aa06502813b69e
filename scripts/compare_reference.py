"""Side-by-side speed of Baton and the reference engine (llama-cpp-python).

Run by scripts/compare-reference.sh inside the reference's virtual
environment. For each model and each of `-r` rounds it runs, alternating,
`baton bench` (one repetition, JSON) and this file's own `ref` mode in a
fresh process, which times the reference the way llama-bench does:

- pp: one batch of `-p` random token ids through `Llama.eval` (n_batch and
  n_ubatch = p, so one llama_decode), after a warm-up batch of at most 512
  of them (as `baton bench` warms up);
- tg: `-n` single-token `Llama.eval` calls from an empty cache, after a
  warm-up. `Llama.eval` is a thin ctypes wrapper around llama_decode that
  also copies the last logits row (tens of microseconds per call).

With `--cache-type T` both engines keep their KV cache in T (Baton's
`-ctk T -ctv T`, the reference's `type_k`/`type_v`); `--flash-attn` turns
the reference's flash attention on (which a quantized V cache needs there;
Baton's attention always streams). The context is `-p + -n + 16`
positions, so `-p 4096` measures a prompt attending over 4k positions.

Figures are tokens per second; the table gives the median over rounds of
each engine and the ratio baton / reference.

With `--memory` it measures what a new user sees instead: each engine in a
fresh process loads the model with a context of 512 positions and
generates 8 tokens from "Hello" (`baton run -p Hello -n 8 -c 512`; the
reference's `Llama(n_ctx=512)` and a call), alternating, after one
untimed run of each so the file is in the page cache. It reports the peak
resident memory of the process (the kernel's `ru_maxrss` for that child)
and the load time (Baton's `load:` line; the reference's `Llama(...)`
constructor, timed inside its process), medians over rounds.
"""

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time


# GGML type ids of the cache types both engines take.
GGML_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "bf16": 30}


def ref_bench(args):
    import llama_cpp

    n_ctx = max(256, args.p + args.n + 16)
    extra = {}
    if args.cache_type:
        extra["type_k"] = extra["type_v"] = GGML_TYPES[args.cache_type]
    llm = llama_cpp.Llama(
        model_path=args.model,
        n_ctx=n_ctx,
        n_batch=max(args.p, 1),
        n_ubatch=max(args.p, 1),
        n_threads=args.t,
        n_threads_batch=args.t,
        flash_attn=args.flash_attn,
        verbose=False,
        **extra,
    )
    vocab = llm.n_vocab()
    rng = random.Random(7)
    out = {}
    if args.p > 0:
        prompt = [rng.randrange(vocab) for _ in range(args.p)]
        llm.reset()
        llm.eval(prompt[:512])  # warm-up, as long as Baton's (at most 512 tokens)
        llm.reset()
        start = time.perf_counter()
        llm.eval(prompt)
        out["pp"] = args.p / (time.perf_counter() - start)
    if args.n > 0:
        tokens = [rng.randrange(vocab) for _ in range(args.n)]
        llm.reset()
        for tok in tokens[:8]:  # warm-up
            llm.eval([tok])
        llm.reset()
        start = time.perf_counter()
        for tok in tokens:
            llm.eval([tok])
        out["tg"] = args.n / (time.perf_counter() - start)
    print(json.dumps(out))


def ref_load(args):
    import llama_cpp

    start = time.perf_counter()
    llm = llama_cpp.Llama(model_path=args.model, n_ctx=512, n_threads=args.t, n_threads_batch=args.t, verbose=False)
    load = time.perf_counter() - start
    llm("Hello", max_tokens=8, temperature=0.0)
    print(json.dumps({"load": load}))


def measure_memory(cmd):
    """Peak RSS (KiB) of one run of `cmd` and what it printed."""
    # stderr goes to a file, so a child that fills one pipe while this reads
    # the other cannot block both.
    with tempfile.TemporaryFile(mode="w+") as err_file:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err_file, text=True)
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        err_file.seek(0)
        err = err_file.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {err[-2000:]}")
    return usage.ru_maxrss, out, err


def baton_memory(baton, model, t):
    cmd = [baton, "run", "-m", model, "-p", "Hello", "-n", "8", "-t", str(t), "-c", "512", "--temp", "0"]
    peak, out, err = measure_memory(cmd)
    match = re.search(r"load: ([0-9.]+) s", out + err)
    if not match:
        raise RuntimeError(f"no load time in baton's output: {(out + err)[-500:]}")
    return {"peak": peak, "load": float(match.group(1))}


def ref_memory(model, t):
    peak, out, _ = measure_memory([sys.executable, __file__, "ref-load", "--model", model, "-t", str(t)])
    return {"peak": peak, "load": json.loads(out.splitlines()[-1])["load"]}


def compare_memory(args):
    print("| model | file MiB | baton peak MiB | reference peak MiB | ratio | baton load s | reference load s | ratio |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for model in args.models:
        baton_memory(args.baton, model, args.t)  # the page cache, warm for both
        ref_memory(model, args.t)
        samples = {"baton": [], "ref": []}
        for round_ in range(args.r):
            engines = [("baton", lambda: baton_memory(args.baton, model, args.t)), ("ref", lambda: ref_memory(model, args.t))]
            for name, run in engines if round_ % 2 == 0 else engines[::-1]:
                samples[name].append(run())
            print(f"{model}: round {round_ + 1}/{args.r} done", file=sys.stderr)
        med = {name: {k: statistics.median(s[k] for s in runs) for k in ("peak", "load")} for name, runs in samples.items()}
        b, r = med["baton"], med["ref"]
        file_mib = os.path.getsize(model) / 2**20
        name = model.rsplit("/", 1)[-1]
        print(f"| {name} | {file_mib:.0f} | {b['peak'] / 1024:.0f} | {r['peak'] / 1024:.0f} | {b['peak'] / r['peak']:.2f}x "
              f"| {b['load']:.2f} | {r['load']:.2f} | {b['load'] / r['load']:.2f}x |")


def baton_bench(baton, model, t, p, n, cache_type):
    cmd = [baton, "bench", "-m", model, "-t", str(t), "-p", str(p), "-n", str(n), "-r", "1", "--json"]
    if cache_type:
        cmd += ["-ctk", cache_type, "-ctv", cache_type]
    lines = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()
    out = {}
    for line in lines:
        row = json.loads(line)
        out["pp" if row["n_prompt"] > 0 else "tg"] = row["avg_ts"]
    return out


def ref_run(model, t, p, n, cache_type, flash_attn):
    cmd = [sys.executable, __file__, "ref", "--model", model, "-t", str(t), "-p", str(p), "-n", str(n)]
    if cache_type:
        cmd += ["--cache-type", cache_type]
    if flash_attn:
        cmd += ["--flash-attn"]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()[-1])


def compare(args):
    rows = []
    for model in args.models:
        samples = {"baton": {"pp": [], "tg": []}, "ref": {"pp": [], "tg": []}}
        for round_ in range(args.r):
            # Alternate which engine goes first, so drift affects both alike.
            order = [("baton", baton_bench), ("ref", None)] if round_ % 2 == 0 else [("ref", None), ("baton", baton_bench)]
            for name, _ in order:
                if name == "baton":
                    got = baton_bench(args.baton, model, args.t, args.p, args.n, args.cache_type)
                else:
                    got = ref_run(model, args.t, args.p, args.n, args.cache_type, args.flash_attn)
                for test, value in got.items():
                    samples[name][test].append(value)
            print(f"{model}: round {round_ + 1}/{args.r} done", file=sys.stderr)
        for test, count in (("pp", args.p), ("tg", args.n)):
            if count == 0:
                continue
            b, r = samples["baton"][test], samples["ref"][test]
            mb, mr = statistics.median(b), statistics.median(r)
            rows.append({"model": model, "test": f"{test}{count}", "threads": args.t, "baton_ts": mb, "ref_ts": mr,
                         "ratio": mb / mr, "baton_samples": b, "ref_samples": r})
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return
    print(f"| model | test | threads | baton t/s | reference t/s | ratio |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        name = row["model"].rsplit("/", 1)[-1]
        print(f"| {name} | {row['test']} | {row['threads']} | {row['baton_ts']:.2f} | {row['ref_ts']:.2f} | {row['ratio']:.2f}x |")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "ref-load":
        ap = argparse.ArgumentParser()
        ap.add_argument("mode")
        ap.add_argument("--model", required=True)
        ap.add_argument("-t", type=int, default=2)
        ref_load(ap.parse_args())
        return
    if len(sys.argv) > 1 and sys.argv[1] == "ref":
        ap = argparse.ArgumentParser()
        ap.add_argument("mode")
        ap.add_argument("--model", required=True)
        ap.add_argument("-t", type=int, default=2)
        ap.add_argument("-p", type=int, default=64)
        ap.add_argument("-n", type=int, default=64)
        ap.add_argument("--cache-type", choices=sorted(GGML_TYPES))
        ap.add_argument("--flash-attn", action="store_true")
        ref_bench(ap.parse_args())
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--baton", required=True)
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("-p", type=int, default=64)
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--cache-type", choices=sorted(GGML_TYPES))
    ap.add_argument("--flash-attn", action="store_true")
    ap.add_argument("--memory", action="store_true")
    ap.add_argument("models", nargs="+")
    args = ap.parse_args()
    compare_memory(args) if args.memory else compare(args)


if __name__ == "__main__":
    main()
