#!/usr/bin/env bash
# Measures Baton against the reference C/C++ CPU engine on the same GGUF
# files, same thread count, alternating runs, and prints each figure and
# the ratio. Not part of CI: the first run installs the reference engine
# through its ordinary PyPI package, llama-cpp-python, which compiles
# itself (minutes on two cores), into target/ref-llama-venv.
#
# Usage: scripts/compare-reference.sh [-r RUNS] [-t THREADS] [-p N_PROMPT] [-n N_GEN] [--json] [MODEL.gguf ...]
#
# Without model arguments it compares the files of the speed issue: the
# real SmolLM2-135M-Instruct Q4_1, a stories15M-shape random model in F32
# and in F16, and a stories110M-shape random model in Q4_K (the synthetic
# ones are written with `baton model synth` into target/compare/).
set -euo pipefail
cd "$(dirname "$0")/.."
REF_PACKAGE=${BATON_REF_PACKAGE:-llama-cpp-python==0.3.16}
venv=target/ref-llama-venv
mkdir -p target/compare

runs=3 threads=2 n_prompt=64 n_gen=64 json=""
models=()
while [ $# -gt 0 ]; do
  case "$1" in
    -r) runs=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    -p) n_prompt=$2; shift 2 ;;
    -n) n_gen=$2; shift 2 ;;
    --json) json=--json; shift ;;
    -h|--help) sed -n 2,13p "$0"; exit 0 ;;
    *) models+=("$1"); shift ;;
  esac
done

if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import llama_cpp' 2>/dev/null; then
  echo "installing the reference engine ($REF_PACKAGE) into $venv; it compiles itself, this takes minutes..." >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check --upgrade pip >&2
  CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "$venv/bin/pip" install --disable-pip-version-check \
    --no-cache-dir "$REF_PACKAGE" >&2
fi

echo "building baton (release)..." >&2
cargo build --release -p baton-cli >&2
baton=$PWD/target/release/baton

if [ ${#models[@]} -eq 0 ]; then
  models+=("$(bash scripts/fetch-smollm2.sh | tail -n 1)")
  for spec in stories15M:f32 stories15M:f16 stories110M:q4_k; do
    shape=${spec%%:*} dtype=${spec##*:}
    file=target/compare/$shape-$dtype.gguf
    if [ ! -s "$file" ]; then
      "$baton" model synth --shape "$shape" --type "$dtype" -o "$file" >&2
    fi
    models+=("$file")
  done
fi

exec "$venv/bin/python" scripts/compare_reference.py --baton "$baton" -r "$runs" -t "$threads" \
  -p "$n_prompt" -n "$n_gen" $json "${models[@]}"
