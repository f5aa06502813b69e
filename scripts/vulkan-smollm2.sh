#!/usr/bin/env bash
# Mixed devices on the real model: SmolLM2-135M-Instruct (Q4_1) on vulkan:0
# and on cpu:0,vulkan:0 (layer split) against one CPU device, in
# teacher-forced logits and perplexity over a short text
# (crates/baton-vulkan/tests/it/mixed.rs). Minutes on lavapipe, so not in CI.
# Usage: scripts/vulkan-smollm2.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BATON_SMOLLM2=$(bash scripts/fetch-smollm2.sh | tail -n1)
VK_ICD_FILENAMES=${VK_ICD_FILENAMES:-$(bash scripts/setup-vulkan.sh | tail -n1)}
export BATON_SMOLLM2 VK_ICD_FILENAMES BATON_REQUIRE_VULKAN=1
exec cargo test --release -p baton-vulkan --test it -- --ignored --nocapture smollm2
