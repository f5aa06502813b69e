#!/usr/bin/env bash
# Run on a machine WITH network, from a checkout, before scripts/gpu-check.sh
# runs on a GPU machine without one: copies SmolLM2 into shared/models/ and
# downloads the Vulkan loader's Debian package (libvulkan1) into
# shared/debs/ (or $BATON_DEBS), which
# gpu-check.sh unpacks when the GPU machine has no libvulkan.so.1. The
# packages are for this machine's Debian/Ubuntu release and architecture:
# prepare on the same release as the GPU machine. Prints the folder.
set -euo pipefail
cd "$(dirname "$0")/.."

debs=${BATON_DEBS:-shared/debs}
mkdir -p "$debs"
if ! command -v apt-get >/dev/null 2>&1; then
  echo "error: apt-get not found: download libvulkan1's .deb for the GPU machine's release into $debs by hand" >&2
  exit 1
fi
# apt-get download needs current package lists (as root: refresh them).
if [ "$(id -u)" = 0 ]; then
  apt-get update -qq >&2
fi
(cd "$debs" && apt-get download libvulkan1 >&2)
found=$(ls "$debs"/libvulkan1_*.deb 2>/dev/null | head -n 1 || true)
if [ -z "$found" ]; then
  echo "error: apt-get download left no libvulkan1_*.deb in $debs" >&2
  exit 1
fi
echo "downloaded: $(basename "$found") ($(dpkg-deb -f "$found" Version 2>/dev/null || echo '?'))" >&2
# SmolLM2 for the mixed-device perplexity step.
mkdir -p shared/models
cp "$(bash scripts/fetch-smollm2.sh | tail -n1)" shared/models/
echo "$debs"
