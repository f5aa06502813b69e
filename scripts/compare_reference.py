"""Side-by-side speed of Baton and the reference engine (llama-cpp-python).

Run by scripts/compare-reference.sh inside the reference's virtual
environment. For each model and each of `-r` rounds it runs, alternating,
`baton bench` (one repetition, JSON) and this file's own `ref` mode in a
fresh process, which times the reference the way llama-bench does:

- pp: one batch of `-p` random token ids through `Llama.eval` (n_batch and
  n_ubatch = p, so one llama_decode), after a warm-up batch;
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
"""

import argparse
import json
import random
import statistics
import subprocess
import sys
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
        llm.eval(prompt)  # warm-up
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
    ap.add_argument("models", nargs="+")
    compare(ap.parse_args())


if __name__ == "__main__":
    main()
