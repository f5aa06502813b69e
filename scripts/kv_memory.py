#!/usr/bin/env python3
"""Resident memory of `baton serve` under the loads of issue 49.

Starts the server with the given flags, reads its RSS (VmRSS) once it
listens, sends `--requests` short completions at once (`--prompt-tokens`
words of text each, `--max-tokens` generated), reads the RSS again, then
optionally `--shared N` requests that all begin with one long shared
system text and go on with different lengths (a server holding the shared
prefix once keeps less). Prints one JSON line of figures.

Usage: python3 scripts/kv_memory.py [--requests 32] [--shared 0]
       -- serve flags...   (e.g. -- --parallel 32 -c 8192, or a pool
       smaller than the load with --kv-pool-blocks N: requests then wait
       and preempt, and the figures count the preemptions)
Only the standard library: run it with any python3.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def complete(port, prompt, max_tokens, errors, usage=None):
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0}).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/completions", body, {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=3600) as r:
            answer = json.load(r)
        if usage is not None:
            usage.append(answer["usage"])
    except Exception as e:  # noqa: BLE001 - reported, not hidden
        errors.append(str(e))


def all_at_once(port, prompts, max_tokens, usage=None):
    errors = []
    threads = [threading.Thread(target=complete, args=(port, p, max_tokens, errors, usage)) for p in prompts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"{len(errors)} requests failed: {errors[0]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--baton", default="target/release/baton")
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--prompt-tokens", type=int, default=40)
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--shared", type=int, default=0, help="requests sharing one long system text")
    ap.add_argument("--shared-words", type=int, default=2000)
    ap.add_argument("--longest", type=int, default=6000, help="words after the shared text, the longest request")
    ap.add_argument("--no-warm", action="store_true", help="send the shared requests all at once, none first")
    ap.add_argument("serve", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    flags = [f for f in a.serve if f != "--"]
    port = free_port()
    proc = subprocess.Popen(
        [a.baton, "serve", "--port", str(port), *flags], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.time() + 300
        while True:
            if proc.poll() is not None:
                sys.exit(f"baton serve exited: {proc.stdout.read()}")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5).read()
                break
            except Exception:  # noqa: BLE001 - not up yet
                if time.time() > deadline:
                    sys.exit("baton serve did not come up in 300 s")
                time.sleep(0.2)
        out = {"flags": " ".join(flags), "idle_rss": rss_bytes(proc.pid)}
        words = "the quick brown fox jumps over a lazy dog and runs far away".split()
        text = lambda n, salt: " ".join(words[(i + salt) % len(words)] for i in range(n))  # noqa: E731
        all_at_once(port, [f"{i}: {text(a.prompt_tokens, i)}" for i in range(a.requests)], a.max_tokens)
        out[f"rss_after_{a.requests}_short"] = rss_bytes(proc.pid)
        if a.shared:
            # One request reads the shared system text first (so the others
            # find it in a running or cached sequence), then all of them.
            system = text(a.shared_words, 0)
            warm = []
            if not a.no_warm:
                all_at_once(port, [system], 1, warm)
            step = (a.longest - 100) // max(a.shared - 1, 1)
            prompts = [f"{system}\n{i}: {text(100 + step * i, i)}" for i in range(a.shared)]
            usage = []
            start = time.time()
            all_at_once(port, prompts, a.max_tokens, usage)
            out["shared_seconds"] = round(time.time() - start, 2)
            out[f"rss_after_{a.shared}_shared"] = rss_bytes(proc.pid)
            # Positions no two sequences share: every request's own, the
            # shared prompt once.
            shared = warm[0]["prompt_tokens"] if warm else min(u["prompt_tokens"] for u in usage) - 100
            total = sum(u["prompt_tokens"] + u["completion_tokens"] for u in usage)
            out["distinct_positions"] = total - (len(usage) - 1) * shared
            out["positions_unshared"] = total
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
        for line in metrics.splitlines():
            if line.startswith(("baton_kv_blocks_", "baton_kv_bytes_used", "baton_kv_preemptions_total")):
                name, value = line.split()
                out[name] = float(value)
        out["cpu"] = next(
            (l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"
        )
        print(json.dumps(out))
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
