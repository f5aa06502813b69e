#!/usr/bin/env bash
# Tensor parallelism against one device on a long text: SmolLM2 (or $MODEL)
# over the Debian license texts (about 26,000 tokens, 203 chunks of 256),
# on one CPU device, `-sm tensor` over cpu:0,cpu:1 and over
# cpu:0,cpu:1,cpu:2, with each difference's standard error
# (scripts/compare-perplexity.py). About an hour on 2 cores; not in CI.
# Usage: scripts/tensor-perplexity.sh [extra set-ups, e.g. "--devices vulkan:0"]
set -euo pipefail
cd "$(dirname "$0")/.."
text=target/licenses.txt
mkdir -p target
licenses=/usr/share/common-licenses
cat "$licenses"/{GPL-3,GPL-2,LGPL-2.1,LGPL-2,GFDL-1.3,GFDL-1.2,MPL-2.0,MPL-1.1,Apache-2.0,GPL-1,CC0-1.0,LGPL-3,Artistic,BSD} >"$text"
model=${MODEL:-$(bash scripts/fetch-smollm2.sh | tail -n1)}
exec python3 scripts/compare-perplexity.py -m "$model" -f "$text" -c 256 \
  "--devices cpu" "--devices cpu:0,cpu:1 -sm tensor" "--devices cpu:0,cpu:1,cpu:2 -sm tensor" "$@"
