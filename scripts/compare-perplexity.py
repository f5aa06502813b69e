#!/usr/bin/env python3
"""Perplexity of one model on several device set-ups against the first,
chunk by chunk, with the statistics a difference needs before it means
anything: the mean difference of the chunks' log-perplexity, its standard
error, and a 95% interval for the ratio of perplexities.

Two computations that differ only in the order of f32 sums (one device
against a tensor split, a CPU against shaders) drift apart on a quantized
model: now and then a last-bit difference moves an 8-bit activation by one
step, and from there on the two runs carry different rounding noise. Their
perplexities then differ by noise of either sign, large on a short text and
shrinking with its length; this script tells that noise from a bias.

Usage:
  scripts/compare-perplexity.py -f TEXT -c 256 [--chunks N] [-m MODEL] \\
      -- "--devices cpu" "--devices cpu:0,cpu:1 -sm tensor" ...
Each set-up is a string of `baton perplexity` flags; the first is the
reference. BATON picks the binary (default target/release/baton).
"""

import argparse
import math
import os
import re
import shlex
import subprocess
import sys


def chunk_nll(baton, common, setup):
    """Per-chunk mean negative log-likelihood, from the running perplexity
    `baton perplexity` prints after every chunk (chunks score equal counts
    of tokens), and the final line."""
    cmd = [baton, "perplexity", *common, *shlex.split(setup)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{out.stderr}")
    text = out.stdout + out.stderr
    running = [float(v) for v in re.findall(r"^\[\d+\] ([0-9.]+)$", text, re.M)]
    final = [line for line in text.splitlines() if line.startswith("perplexity:")]
    nll, before = [], 0.0
    for n, ppl in enumerate(running, start=1):
        total = n * math.log(ppl)
        nll.append(total - before)
        before = total
    return nll, (final[-1] if final else "")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-f", "--file", required=True)
    parser.add_argument("-c", "--ctx-size", default="256")
    parser.add_argument("--chunks")
    parser.add_argument("-m", "--model")
    parser.add_argument("setups", nargs="+")
    args = parser.parse_args()
    baton = os.environ.get("BATON", "target/release/baton")
    common = ["-f", args.file, "-c", args.ctx_size]
    if args.chunks:
        common += ["--chunks", args.chunks]
    if args.model:
        common += ["-m", args.model]
    reference, line = chunk_nll(baton, common, args.setups[0])
    print(f"{args.setups[0]}: {line}")
    for setup in args.setups[1:]:
        nll, line = chunk_nll(baton, common, setup)
        if len(nll) != len(reference):
            sys.exit(f"{setup}: {len(nll)} chunks against {len(reference)}")
        diff = [a - b for a, b in zip(nll, reference)]
        n = len(diff)
        mean = sum(diff) / n
        sd = math.sqrt(sum((d - mean) ** 2 for d in diff) / (n - 1)) if n > 1 else float("nan")
        se = sd / math.sqrt(n)
        lo, hi = math.exp(mean - 1.96 * se) - 1, math.exp(mean + 1.96 * se) - 1
        print(f"{setup}: {line}")
        print(
            f"  against the first: {100 * (math.exp(mean) - 1):+.3f}% over {n} chunks; "
            f"chunks differ by {100 * sd:.2f}% (sd), so the mean is known to {100 * se:.3f}% (se); "
            f"95% interval [{100 * lo:+.3f}%, {100 * hi:+.3f}%]"
        )


if __name__ == "__main__":
    main()
