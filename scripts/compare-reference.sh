#!/usr/bin/env bash
# Measures Baton against the reference C/C++ CPU engine on the same GGUF
# files, same thread count, alternating runs, and prints each figure and
# the ratio. Not part of CI: the first run installs the reference engine
# through its ordinary PyPI package, llama-cpp-python, which compiles
# itself (minutes on two cores), into target/ref-llama-venv.
#
# Usage: scripts/compare-reference.sh [-r RUNS] [-t THREADS] [-p N_PROMPT] [-n N_GEN] [--isa avx2|avxvnni] [--json]
#          [--cache-type f16|q8_0|...] [--flash-attn] [--memory] [--install-only] [MODEL.gguf ...]
#        scripts/compare-reference.sh [--isa avx2|avxvnni] --print-cmake-args   (the reference's build flags here)
#
# Without model arguments it compares the files of the speed issue: the
# real SmolLM2-135M-Instruct Q4_1, a stories15M-shape random model in F32
# and in F16, a stories110M-shape random model in Q4_K (the synthetic
# ones are written with `baton model synth` into target/compare/), and the
# real Gemma 3 270M Q4_K_M (`baton model fetch gemma3-270m`). Other files
# are named as arguments, e.g. a BF16 one: `baton model synth --shape
# stories15M --type bf16 -o target/compare/stories15M-bf16.gguf`.
# --memory compares peak RSS and load time instead of speed (each engine
# loads with a 512-position context and generates 8 tokens; see
# compare_reference.py).
# --install-only builds the reference engine and stops.
# --isa avx2 compares both engines at the AVX2 level (what an AMD EPYC or
# an older Intel runs): the reference is built with the AVX2 set only, into
# its own target/ref-llama-venv-avx2, and Baton runs with BATON_ISA=avx2.
# On an AVX2 machine it is what the default does anyway. --isa avxvnni is
# the AVX2 set plus AVX-VNNI (an Alder Lake or Sierra Forest core), in
# target/ref-llama-venv-avxvnni, Baton at BATON_ISA=avxvnni.
set -euo pipefail
cd "$(dirname "$0")/.."
REF_PACKAGE=${BATON_REF_PACKAGE:-llama-cpp-python==0.3.36}
venv=target/ref-llama-venv
mkdir -p target/compare

runs=3 threads=2 n_prompt=64 n_gen=64 json="" print_args="" install_only="" isa="" cache=()
models=()
while [ $# -gt 0 ]; do
  case "$1" in
    -r) runs=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    -p) n_prompt=$2; shift 2 ;;
    -n) n_gen=$2; shift 2 ;;
    --json) json=--json; shift ;;
    --cache-type) cache+=(--cache-type "$2"); shift 2 ;;
    --flash-attn) cache+=(--flash-attn); shift ;;
    --memory) cache+=(--memory); shift ;;
    --print-cmake-args) print_args=1; shift ;;
    --install-only) install_only=1; shift ;;
    --isa)
      isa=$2; shift 2
      if [ "$isa" != avx2 ] && [ "$isa" != avxvnni ]; then
        echo "--isa takes avx2 or avxvnni (the default is every extension this CPU runs)" >&2
        exit 2
      fi ;;
    -h|--help) sed -n 2,24p "$0"; exit 0 ;;
    *) models+=("$1"); shift ;;
  esac
done

# The reference's build flags for this CPU (and --isa): reference_cmake_args.
source scripts/reference-build.sh
if [ -n "$print_args" ]; then
  reference_cmake_args
  exit 0
fi
cmake_args=$(reference_cmake_args)
if [ -n "$isa" ]; then
  venv=target/ref-llama-venv-$isa
  export BATON_ISA=$isa
fi

if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import llama_cpp' 2>/dev/null \
  || [ "$(cat "$venv/.cmake-args" 2>/dev/null)" != "$REF_PACKAGE $cmake_args" ]; then
  install_reference "$venv" "$REF_PACKAGE" "$cmake_args"
fi
echo "reference engine: $REF_PACKAGE built with $cmake_args" >&2
if [ -n "$install_only" ]; then
  exit 0
fi
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')${isa:+ (both engines limited to $isa)}" >&2

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
  models+=("$("$baton" model fetch gemma3-270m | tail -n 1)")
fi

exec "$venv/bin/python" scripts/compare_reference.py --baton "$baton" -r "$runs" -t "$threads" \
  -p "$n_prompt" -n "$n_gen" $json "${cache[@]}" "${models[@]}"
