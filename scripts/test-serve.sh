#!/usr/bin/env bash
# `baton serve` checked with the official `openai` Python client
# (tests/serve/openai_client.py), and with the `anthropic` client and the
# `openai` client's Responses API (tests/serve/messages_responses_client.py),
# and a reasoning model's thinking on chat, Messages and Responses through
# both clients (tests/serve/reasoning_client.py, a second server), and the
# frameworks over the OpenAI API: instructor, LangChain's ChatOpenAI and
# litellm (tests/serve/frameworks_client.py, a venv of their own):
# chat and completions, streamed and whole,
# stop strings, seeds, errors, structured output and tool calls (answers
# validated by the `jsonschema` package), and `/metrics` read by
# `prometheus_client`'s parser. Builds baton (release), installs `openai` in
# the reference venv (scripts/setup-python.sh), starts the server on a free
# port with SmolLM2 (BATON_SMOLLM2, default: the cached SmolLM2-135M-Instruct
# Q4_1) and stops it on exit. BATON_BIN names a baton binary to use instead
# of building target/release/baton. BATON_SERVE_RANKS=N serves over N
# ranks of an MPI job (scripts/mpirun.sh; `--devices cpu@0,...,cpu@N-1`,
# one thread each, `-sm` BATON_SERVE_SPLIT, default layer, which may carry
# more arguments: "tensor --tensor-exact"), where embeddings are refused.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
model=${BATON_SMOLLM2:-$HOME/.cache/baton/models/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -f "$model" ] || { echo "test-serve: no model at $model (scripts/fetch-smollm2.sh)" >&2; exit 1; }

python=$(scripts/setup-python.sh | tail -n1)
# The frameworks over the OpenAI API (tests/serve/frameworks_client.py) in
# a venv of their own: litellm and LangChain pull versions of tokenizers
# and others that the reference venv's checks must not see. Installed once
# per venv (about a minute the first time, nothing after).
clients=$repo/target/clients-venv
exec 8>"$clients.lock"
flock 8
[ -x "$clients/bin/python" ] || python3 -m venv "$clients" >&2
# (Asked of the installed metadata: importing litellm takes seconds and
# reaches for the network.)
"$clients/bin/python" -c 'import importlib.metadata as m; [m.version(p) for p in ("instructor", "langchain-openai", "litellm")]' 2>/dev/null ||
  "$clients/bin/pip" install --quiet --disable-pip-version-check "instructor>=1.10,<2" "langchain-openai>=1.0,<2" \
    "litellm>=1.70,<2" >&2
flock -u 8
venv=$(dirname "$(dirname "$python")")
exec 9>"$venv.lock"
flock 9
"$python" -c 'import openai, prometheus_client, jsonschema, anthropic' 2>/dev/null ||
  "$venv/bin/pip" install --quiet --disable-pip-version-check "openai>=1.40" "prometheus-client>=0.20" "jsonschema>=4" \
    "anthropic==2.10.0" >&2
flock -u 9

baton=${BATON_BIN:-}
if [ -z "$baton" ]; then
  source scripts/test-build.sh
  baton=$(build_release_binaries)/release/baton
fi
log=$(mktemp)
server=
thinking=
cleanup() {
  for pid in $server $thinking; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  rm -f "$log" "$log.thinking"
}
trap cleanup EXIT
# The address a server started with `--port 0` listens on, from its log
# (pid $1, log $2), once it listens.
listening() {
  local found=
  for _ in $(seq 600); do
    found=$(grep -o 'listening on http://[0-9.:]*' "$2" | head -n1 | sed 's/listening on //') || true
    [ -n "$found" ] && break
    kill -0 "$1" 2>/dev/null || { cat "$2" >&2; echo "test-serve: the server exited" >&2; exit 1; }
    sleep 0.1
  done
  [ -n "$found" ] || { cat "$2" >&2; echo "test-serve: the server did not start" >&2; exit 1; }
  echo "$found"
}
ranks=${BATON_SERVE_RANKS:-1}
if [ "$ranks" -gt 1 ]; then
  devices=$(seq 0 $((ranks - 1)) | sed 's/^/cpu@/' | paste -sd,)
  scripts/mpirun.sh -np "$ranks" "$baton" serve -m "$model" --host 127.0.0.1 --port 0 --parallel 2 -c 1024 -t 1 \
    --devices "$devices" -sm ${BATON_SERVE_SPLIT:-layer} 2>"$log" &
  export BATON_SERVE_OVER_RANKS=1
else
  "$baton" serve -m "$model" --host 127.0.0.1 --port 0 --parallel 2 -c 1024 -t 2 2>"$log" &
fi
server=$!
addr=$(listening "$server" "$log")
echo "test-serve: server at $addr" >&2
"$python" tests/serve/openai_client.py "$addr/v1"
"$python" tests/serve/messages_responses_client.py "$addr"
# The frameworks and the thinking go through the HTTP layer only, which is
# the same over ranks: checked once, in the one-process run (test-mpi.sh
# runs this script over ranks besides).
if [ "$ranks" -eq 1 ]; then
  "$clients/bin/python" tests/serve/frameworks_client.py "$addr/v1"
  # A reasoning model's thinking on every route: a second server whose chat
  # template opens the thinking.
  "$baton" serve -m "$model" --host 127.0.0.1 --port 0 --parallel 1 -c 512 -t 1 \
    --chat-template-file tests/serve/thinking-template.jinja 2>"$log.thinking" &
  thinking=$!
  thinking_addr=$(listening "$thinking" "$log.thinking")
  "$python" tests/serve/reasoning_client.py "$thinking_addr"
  kill "$thinking"
  wait "$thinking" 2>/dev/null || true
  thinking=
fi
# Ctrl-C (SIGINT) drains and exits 0. Over ranks it goes to rank 0, the
# server (mpirun's own SIGINT ends the job at once); the other ranks end
# when rank 0 tells them.
if [ "$ranks" -gt 1 ]; then
  source scripts/rank-pid.sh
  kill -INT "$(rank_pid "$server" 0)"
else
  kill -INT "$server"
fi
status=0
wait "$server" || status=$?
server=
[ "$status" -eq 0 ] || { cat "$log" >&2; echo "test-serve: the server exited $status after SIGINT" >&2; exit 1; }
echo "test-serve: passed" >&2
