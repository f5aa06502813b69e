#!/usr/bin/env python3
"""Bounded load test of `baton serve` (issue 17): concurrent clients, a fixed
number of requests mixing streaming and whole completions, clients that
disconnect mid-stream and malformed requests. Standard library only.

Checks, each deterministic given the server's batch invariance:
- every greedy request's text, finish_reason and usage equal the same
  request served alone before the load (nothing lost, mixed or truncated);
- a stream ends with [DONE], its usage chunk counts the tokens it carried
  and finish_reason is "length" exactly when max_tokens were generated;
- every malformed request gets a 4xx with a JSON `error` object;
- the server still answers afterwards, and a load after a warm-up load
  grows its RSS by no more than a margin (up to three loads are measured:
  a leak grows every one, the allocator's settling does not repeat).
Exits 1 on the first failed check, 2 on a setup error.
"""

import argparse
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time

PROMPTS = [
    "Once upon a time", "The capital of France is", "def fibonacci(n):",
    "In the beginning there was", "List three colours:", "The weather today",
    "A recipe for bread:", "Q: What is two plus two?\nA:", "My favourite animal is",
    "The quick brown fox", "Dear friend,", "Chapter one.",
]
MAX_TOKENS = [4, 9, 16, 23]
# Measured loads at most (see main).
ROUNDS = 3


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


class Server:
    def __init__(self, baton, model, parallel, context, extra):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        cmd = [baton, "serve", "-m", model, "--host", "127.0.0.1", "--port", str(self.port),
               "--parallel", str(parallel), "-c", str(context)] + extra
        self.log = open(os.environ.get("LOAD_TEST_LOG", "/dev/null"), "w")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                print(f"baton serve exited with {self.proc.returncode}: {' '.join(cmd)}", file=sys.stderr)
                sys.exit(2)
            try:
                if self.request("GET", "/health", None)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        self.proc.kill()
        print("baton serve did not answer /health within 120 s", file=sys.stderr)
        sys.exit(2)

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        fail("no VmRSS in /proc/PID/status")

    def request(self, method, path, body, raw=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
            conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            return response.status, response.read().decode()
        finally:
            conn.close()

    def stream(self, body, stop_after=None):
        """Streams a completion; returns (status, events) or the error body;
        with stop_after, closes the connection after that many events."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            if response.status != 200:
                return response.status, response.read().decode()
            events, done = [], False
            for line in response:
                line = line.decode().strip()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    done = True
                    break
                events.append(json.loads(data))
                if stop_after is not None and len(events) >= stop_after:
                    break
            return 200, (events, done)
        finally:
            conn.close()

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            fail("baton serve did not exit within 20 s of SIGTERM")


def body(prompt, max_tokens, stream):
    b = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": stream}
    if stream:
        b["stream_options"] = {"include_usage": True}
    return b


MALFORMED = [
    ("not json", dict(raw=b"{\"prompt\": ")),
    ("wrong type", dict(body={"prompt": "hi", "max_tokens": "ten"})),
    ("no prompt", dict(body={"max_tokens": 4})),
    # Any model name is served (as llama-server); a model that is no string is malformed.
    ("model of the wrong type", dict(body={"prompt": "hi", "max_tokens": 4, "model": 42})),
    ("max_tokens past the context", dict(body={"prompt": "hi", "max_tokens": 10**7})),
    ("negative temperature", dict(body={"prompt": "hi", "max_tokens": 4, "temperature": -1})),
]


def check_whole(server, key, reference):
    prompt, max_tokens = key
    status, text = server.request("POST", "/v1/completions", body(prompt, max_tokens, False))
    if status != 200:
        fail(f"{key}: status {status}: {text}")
    answer = json.loads(text)
    got = (answer["choices"][0]["text"], answer["choices"][0]["finish_reason"], answer["usage"]["completion_tokens"])
    if got != reference[key]:
        fail(f"{key}: whole answer {got!r} differs from the same request alone {reference[key]!r}")


def check_stream(server, key, reference):
    prompt, max_tokens = key
    status, result = server.stream(body(prompt, max_tokens, True))
    if status != 200:
        fail(f"{key}: status {status}: {result}")
    events, done = result
    if not done:
        fail(f"{key}: the stream ended without [DONE] after {len(events)} events")
    text = "".join(e["choices"][0]["text"] for e in events if e.get("choices"))
    finishes = [e["choices"][0]["finish_reason"] for e in events if e.get("choices") and e["choices"][0].get("finish_reason")]
    usage = [e["usage"] for e in events if e.get("usage")]
    if len(finishes) != 1 or len(usage) != 1:
        fail(f"{key}: {len(finishes)} finish_reason(s) and {len(usage)} usage chunk(s) in one stream")
    got = (text, finishes[0], usage[0]["completion_tokens"])
    if got != reference[key]:
        fail(f"{key}: streamed answer {got!r} differs from the same request alone {reference[key]!r}")


def check_malformed(server, index):
    name, spec = MALFORMED[index % len(MALFORMED)]
    status, text = server.request("POST", "/v1/completions", spec.get("body"), raw=spec.get("raw"))
    if not 400 <= status < 500:
        fail(f"malformed request ({name}): status {status}, expected 4xx: {text}")
    try:
        error = json.loads(text)["error"]
        assert isinstance(error["message"], str)
    except (ValueError, KeyError, TypeError, AssertionError):
        fail(f"malformed request ({name}): the 4xx body is not a JSON error object: {text!r}")


def disconnect(server, key):
    prompt, _ = key
    # Long enough that the client leaves while the sequence still runs.
    status, result = server.stream(body(prompt, 200, True), stop_after=2)
    if status != 200:
        fail(f"{key}: disconnecting stream got status {status}: {result}")


def plan(rng, requests):
    keys = [(p, m) for p in PROMPTS for m in MAX_TOKENS]
    kinds = ["stream"] * 40 + ["whole"] * 30 + ["disconnect"] * 15 + ["malformed"] * 15
    return [(rng.choice(kinds), rng.choice(keys), i) for i in range(requests)]


def run_load(server, reference, jobs, clients):
    queue = list(jobs)
    lock = threading.Lock()
    errors = []
    counts = {}

    def worker():
        while True:
            with lock:
                if not queue or errors:
                    return
                kind, key, index = queue.pop(0)
            try:
                if kind == "stream":
                    check_stream(server, key, reference)
                elif kind == "whole":
                    check_whole(server, key, reference)
                elif kind == "disconnect":
                    disconnect(server, key)
                else:
                    check_malformed(server, index)
            except SystemExit as e:
                with lock:
                    errors.append(e)
                return
            except Exception as e:  # a broken connection or a non-JSON answer
                with lock:
                    errors.append(f"{kind} {key}: {type(e).__name__}: {e}")
                return
            with lock:
                counts[kind] = counts.get(kind, 0) + 1

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        if isinstance(errors[0], str):
            fail(errors[0])
        sys.exit(1)
    return counts


def wait_idle(server, seconds=2.0):
    """Lets cancelled sequences be reaped and the allocator settle."""
    time.sleep(seconds)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baton", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--context", type=int, default=256)
    # glibc malloc keeps freed blocks in per-thread arenas, so RSS after a
    # load wanders by a few MiB without any leak (tiny model: +3.5 MiB after
    # 200 requests, +2.5 MiB after 800: it does not grow with the requests);
    # a per-request leak would. Margin: this many KiB or 5% of the idle RSS,
    # whichever is larger.
    ap.add_argument("--rss-margin-kib", type=int, default=8192)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("serve_args", nargs="*", help="more arguments for baton serve (after --)")
    args = ap.parse_args()
    start = time.monotonic()
    server = Server(args.baton, args.model, args.parallel, args.context, args.serve_args)
    try:
        # Each distinct request served alone: the reference answers.
        reference = {}
        for prompt in PROMPTS:
            for max_tokens in MAX_TOKENS:
                status, text = server.request("POST", "/v1/completions", body(prompt, max_tokens, False))
                if status != 200:
                    fail(f"reference {prompt!r}: status {status}: {text}")
                a = json.loads(text)
                c = a["choices"][0]
                n = a["usage"]["completion_tokens"]
                if (c["finish_reason"] == "length") != (n == max_tokens) or n > max_tokens:
                    fail(f"reference {prompt!r}: finish_reason {c['finish_reason']} with {n} of {max_tokens} tokens")
                reference[(prompt, max_tokens)] = (c["text"], c["finish_reason"], n)
        rng = random.Random(args.seed)
        # A warm-up load of the same shape: the allocator's arenas and the
        # batch's scratch grow to their working size here.
        run_load(server, reference, plan(rng, args.requests // 2), args.clients)
        wait_idle(server)
        # Measured loads. A per-request leak grows the RSS in every load by
        # about the same amount; the allocator's settling (which arena a
        # thread lands in varies from run to run) does not repeat. So the
        # check fails only when each of up to ROUNDS loads grew the RSS by
        # more than the margin: its sensitivity stays margin / requests
        # per request, and a slow settling does not fail it.
        idle_kib = server.rss_kib()
        margin = max(args.rss_margin_kib, idle_kib // 20)
        counts, rounds, after_kib = {}, [], idle_kib
        for _ in range(ROUNDS):
            before_kib = after_kib
            for kind, n in run_load(server, reference, plan(rng, args.requests), args.clients).items():
                counts[kind] = counts.get(kind, 0) + n
            wait_idle(server)
            after_kib = server.rss_kib()
            rounds.append(after_kib - before_kib)
            if rounds[-1] <= margin:
                break
        if server.request("GET", "/health", None)[0] != 200:
            fail("the server does not answer /health after the load")
        check_stream(server, (PROMPTS[0], MAX_TOKENS[-1]), reference)
        print(f"requests: {sum(counts.values())} ({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}) "
              f"from {args.clients} clients in {len(rounds)} load(s) of {args.requests}; RSS idle {idle_kib} KiB, "
              f"after {after_kib} KiB; growth per load {', '.join(f'{g:+d}' for g in rounds)} KiB "
              f"(margin {margin} KiB); {time.monotonic() - start:.1f} s")
        if rounds[-1] > margin:
            fail(f"RSS grew by more than the {margin} KiB margin in each of {len(rounds)} loads "
                 f"({', '.join(f'{g:+d}' for g in rounds)} KiB): a leak")
        if sum(counts.values()) != args.requests * len(rounds):
            fail(f"{sum(counts.values())} of {args.requests * len(rounds)} requests completed")
    finally:
        server.stop()
    print("load test passed")


if __name__ == "__main__":
    main()
