#!/usr/bin/env bash
# The MPI tests (crates/baton-mpi, feature `mpi`), on loopback: installs
# Open MPI if missing (scripts/setup-mpi.sh), runs the crate's unit tests,
# then the SPMD test program under scripts/mpirun.sh:
# - collectives under 2 ranks (wait policies block and poll) and 3 ranks;
# - the silent-rank test under 2 and 3 ranks: one rank stops itself
#   (SIGSTOP); every other rank must fail within the deadline with an error
#   naming it, and the job must exit non-zero, all within `timeout`;
# - a plan split over 2 and 3 ranks (one device each, groups alternating
#   over the ranks) against the same plan in one process, bit for bit,
#   with rank 0 submitting late (the others' hosts must not block);
# - the failing-rank test: one rank's stream fails with an error just
#   before an all-reduce gate; every rank must fail at once with that cause;
# - `baton devices` (feature mpi) under 2 ranks, and a bad device list;
# - `baton run` over ranks (`--devices cpu@0,cpu@1 -sm layer`, 2 and 3
#   ranks): text and logits bit for bit as one process, on the tiny
#   synthetic model, the qwen3moe and gpt-oss synthetic models (mixtures
#   of experts), the qwen35moe one (recurrent layers) and SmolLM2 (fetched by scripts/fetch-smollm2.sh);
#   `baton bench` over 2 ranks;
# - bad launches: a rank with another model file (other size; same size,
#   other header) or other arguments is an error on every rank;
# - the killed-rank test: one rank kills itself (SIGKILL); mpirun must end
#   the job with a non-zero status well before the 30 s deadline;
# - `baton run -sm tensor` over 2 and 3 ranks (the composite's gates over
#   MPI, and over the butterfly): --tensor-exact bit for bit as one
#   process's -sm tensor, partial sums within its NMSE bound; rank 1
#   stopped mid-decode under -sm tensor;
# - `baton run -sm expert` over 2 and 3 ranks (each rank's device holding
#   its share of every layer's experts) on the qwen3moe, gpt-oss and
#   qwen35moe synthetic models: --tensor-exact bit for bit as one process
#   on one device, partial sums bit for bit as one process's -sm expert;
# - `baton conformance` across 2 ranks under each wait policy;
# - `baton serve` over 2 ranks (-sm layer and tensor): the openai client
#   test, one process's greedy text, and rank 1 stopped mid-stream (an
#   error event naming it, the job ended within the deadline).
# Uses CARGO_TARGET_DIR when set.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/test-build.sh
source scripts/rank-pid.sh
# The release build the rest of the suite uses (nothing to compile after
# scripts/test.sh's nextest run, which also ran the crate's unit tests).
target=$(build_release_binaries)
if [ "${BATON_MPI_UNIT_TESTS_RAN:-0}" != 1 ]; then
  cargo nextest run --release --workspace --features "$BATON_TEST_FEATURES" -E 'package(baton-mpi)'
fi
program="$target/release/examples/mpi_check"
failures=0

fail() { echo "FAILED: $*" >&2; failures=$((failures + 1)); }

collectives() { # RANKS POLICY
  local out rc=0
  out=$(BATON_WAIT_POLICY=$2 timeout 300 scripts/mpirun.sh -np "$1" "$program" collectives 2>&1) || rc=$?
  local ok
  ok=$(printf '%s\n' "$out" | grep -c 'collectives ok' || true)
  if [ "$rc" != 0 ] || [ "$ok" != "$1" ]; then
    printf '%s\n' "$out" >&2
    fail "collectives, $1 ranks, policy $2 (exit $rc, $ok of $1 ranks ok)"
  else
    echo "ok: collectives, $1 ranks, policy $2"
  fi
}

split() { # RANKS
  local out rc=0 ok
  out=$(timeout 120 scripts/mpirun.sh -np "$1" "$target/release/examples/mpi_split" 2>&1) || rc=$?
  ok=$(printf '%s\n' "$out" | grep -c 'split ok' || true)
  if [ "$rc" != 0 ] || [ "$ok" != "$1" ] || ! printf '%s\n' "$out" | grep -q '[1-9][0-9]* outputs compared bit for bit'; then
    printf '%s\n' "$out" >&2
    fail "a plan split over $1 ranks (exit $rc, $ok of $1 ranks ok)"
  else
    echo "ok: a plan split over $1 ranks, bit for bit as in one process"
  fi
}

silent() { # RANKS SILENT_RANK DEADLINE_S
  local out rc=0 started ended
  started=$(date +%s)
  out=$(timeout 60 scripts/mpirun.sh -np "$1" "$program" silent "$2" "$3" 2>&1) || rc=$?
  ended=$(date +%s)
  local expected=$(($1 - 1)) named
  named=$(printf '%s\n' "$out" | grep -c "failed as expected after .*silent rank(s) \[$2\]" || true)
  if [ "$rc" = 0 ] || [ "$rc" = 124 ] || [ "$named" != "$expected" ] \
    || printf '%s\n' "$out" | grep -q '^FAIL'; then
    printf '%s\n' "$out" >&2
    fail "silent rank $2 of $1 (exit $rc, $named of $expected ranks named it)"
  else
    echo "ok: silent rank $2 of $1 named by the $expected others; job exit $rc after $((ended - started)) s"
  fi
}

failing() { # RANKS FAILING_RANK
  local out rc=0 named
  out=$(timeout 60 scripts/mpirun.sh -np "$1" "$program" failing "$2" 2>&1) || rc=$?
  named=$(printf '%s\n' "$out" | grep -c "failed as expected after .*injected device failure" || true)
  if [ "$rc" = 0 ] || [ "$rc" = 124 ] || [ "$named" != "$1" ] || printf '%s\n' "$out" | grep -q '^FAIL'; then
    printf '%s\n' "$out" >&2
    fail "failing rank $2 of $1 (exit $rc, $named of $1 ranks saw the first cause at once)"
  else
    echo "ok: failing rank $2 of $1: every rank failed at once with its first cause; job exit $rc"
  fi
}

killed() { # RANKS KILLED_RANK
  local out rc=0 started ended
  started=$(date +%s)
  out=$(timeout 60 scripts/mpirun.sh -np "$1" "$program" killed "$2" 2>&1) || rc=$?
  ended=$(date +%s)
  if [ "$rc" = 0 ] || [ "$rc" = 124 ] || [ $((ended - started)) -gt 20 ] \
    || ! printf '%s\n' "$out" | grep -q "killing myself" || printf '%s\n' "$out" | grep -q '^FAIL'; then
    printf '%s\n' "$out" >&2
    fail "killed rank $2 of $1 (exit $rc after $((ended - started)) s)"
  else
    echo "ok: killed rank $2 of $1: mpirun ended the job, exit $rc after $((ended - started)) s"
  fi
}

# The CLI with ranks as devices: `baton devices` lists every rank's devices;
# a list naming a rank the job lacks is an error on every rank.
cli_devices() {
  local baton="$target/release/baton" out rc=0
  out=$(timeout 120 scripts/mpirun.sh -np 2 "$baton" devices --devices cpu:0@0,cpu:1@0,cpu@1 2>&1) || rc=$?
  if [ "$rc" != 0 ] || ! printf '%s\n' "$out" | grep -q '^cpu:1@0 ' || ! printf '%s\n' "$out" | grep -q '^cpu@1 '; then
    printf '%s\n' "$out" >&2
    fail "baton devices under 2 ranks (exit $rc)"
  else
    echo "ok: baton devices lists both ranks' devices"
  fi
  rc=0
  out=$(timeout 120 scripts/mpirun.sh -np 2 "$baton" devices --devices cpu@0,cpu@2 2>&1) || rc=$?
  local errors
  errors=$(printf '%s\n' "$out" | grep -c 'device "cpu@2": the job has 2 rank' || true)
  if [ "$rc" = 0 ] || [ "$errors" != 2 ]; then
    printf '%s\n' "$out" >&2
    fail "a device on a missing rank (exit $rc, $errors of 2 ranks said why)"
  else
    echo "ok: a device on a missing rank is an error on every rank"
  fi
  rc=0
  out=$(timeout 120 scripts/mpirun.sh -np 1 "$baton" devices : -np 1 "$baton" devices --json 2>&1) || rc=$?
  errors=$(printf '%s\n' "$out" | grep -c 'ranks \[1\] differ from rank 0 in the command line' || true)
  if [ "$rc" = 0 ] || [ "$errors" != 2 ]; then
    printf '%s\n' "$out" >&2
    fail "ranks started with other arguments (exit $rc, $errors of 2 ranks said why)"
  else
    echo "ok: ranks started with other arguments is an error on every rank"
  fi
}

# `baton run` over RANKS ranks against one process: text and logits.
cli_run() { # MODEL RANKS LABEL [DEVICES [EXTRA...]]
  local baton="$target/release/baton" model=$1 ranks=$2 label=$3 devices rc=0 args
  shift 3
  devices=${1:-$(seq -s, 0 $((ranks - 1)) | sed 's/\([0-9]\+\)/cpu@\1/g')}
  [ $# -gt 0 ] && shift
  set -- "$model" "$ranks" "$label" "$devices" "$@"
  args=(run -m "$1" -p "The capital of France is" -n 12 --temp 0 "${@:5}")
  timeout 120 "$baton" "${args[@]}" --devices cpu --logits-out "$work/one.bin" >"$work/one.out" 2>/dev/null || rc=$?
  timeout 300 scripts/mpirun.sh -np "$2" "$baton" "${args[@]}" --devices "$devices" -t 1 \
    --logits-out "$work/ranks.bin" >"$work/ranks.out" 2>"$work/ranks.err" || rc=$?
  if [ "$rc" != 0 ] || ! cmp -s "$work/one.out" "$work/ranks.out" || ! cmp -s "$work/one.bin" "$work/ranks.bin" \
    || [ ! -s "$work/one.bin" ]; then
    cat "$work/ranks.err" >&2
    fail "baton run over $2 ranks ($devices) on $3 (exit $rc): text or logits differ from one process"
  else
    echo "ok: baton run over $2 ranks ($devices) on $3: text and $(($(stat -c %s "$work/one.bin") / 4)) logits bit for bit as one process"
  fi
}

# NMSE (sum (a-b)^2 / sum b^2) of two f32 logits files, printed.
nmse() { # GOT WANT
  python3 - "$1" "$2" <<'PY'
import array, sys
a, b = array.array('f'), array.array('f')
a.frombytes(open(sys.argv[1], 'rb').read()); b.frombytes(open(sys.argv[2], 'rb').read())
assert len(a) == len(b) and len(b) > 0, (len(a), len(b))
err = sum((float(x) - float(y)) ** 2 for x, y in zip(a, b)); norm = sum(float(y) ** 2 for y in b)
print(f"{err / max(norm, 1e-300):.3e}")
PY
}

# `baton run -sm tensor` over RANKS ranks (the composite's gates over MPI)
# against the one-process `-sm tensor` over cpu:0,cpu:1,...: with
# --tensor-exact, text and logits bit for bit; with partial sums, the same
# text and logits within the NMSE bound of the in-process tensor split's
# own tests (1e-4 with quantized weights, crates/baton-model tests).
cli_tensor() { # MODEL RANKS LABEL EXACT(exact|partial) COLLECTIVE [DEVICES [EXTRA...]]
  local baton="$target/release/baton" model=$1 ranks=$2 label=$3 exact=$4 collective=$5 devices local rc=0 args e
  shift 5
  devices=${1:-$(seq -s, 0 $((ranks - 1)) | sed 's/\([0-9]\+\)/cpu@\1/g')}
  [ $# -gt 0 ] && shift
  local=$(seq -s, 0 $((ranks - 1)) | sed 's/\([0-9]\+\)/cpu:\1/g')
  args=(run -m "$model" -p "The capital of France is" -n 12 --temp 0 -sm tensor -t 1 "$@")
  [ "$exact" = exact ] && args+=(--tensor-exact)
  timeout 120 "$baton" "${args[@]}" --devices "$local" --logits-out "$work/one.bin" >"$work/one.out" 2>/dev/null || rc=$?
  timeout 300 scripts/mpirun.sh -np "$ranks" "$baton" "${args[@]}" --devices "$devices" --rank-collective "$collective" \
    --logits-out "$work/ranks.bin" >"$work/ranks.out" 2>"$work/ranks.err" || rc=$?
  local what="-sm tensor ($exact, $collective) over $ranks ranks ($devices${*:+ $*}) on $label"
  if [ "$rc" != 0 ] || [ ! -s "$work/one.bin" ] || ! cmp -s "$work/one.out" "$work/ranks.out"; then
    cat "$work/ranks.err" >&2
    fail "$what (exit $rc): the text differs from one process's -sm tensor over $local"
  elif [ "$exact" = exact ] && ! cmp -s "$work/one.bin" "$work/ranks.bin"; then
    fail "$what: the logits differ from one process's"
  elif [ "$exact" = exact ]; then
    echo "ok: $what: text and $(($(stat -c %s "$work/one.bin") / 4)) logits bit for bit as one process"
  else
    e=$(nmse "$work/ranks.bin" "$work/one.bin")
    if ! python3 -c "import sys; sys.exit(0 if float('$e') <= 1e-4 else 1)"; then
      fail "$what: logits NMSE $e above 1e-4"
    else
      echo "ok: $what: the same text, logits NMSE $e (bound 1e-4)"
    fi
  fi
}

# `baton conformance` across 2 ranks (the other device on the other rank:
# crates/baton-cli/src/cmd/conformance_ranks.rs) under wait policy POLICY:
# every rule passes but W-FOREIGN, an expected failure (docs/contract.md).
# `baton run -sm expert` over RANKS ranks, each rank's device holding its
# share of every layer's experts (every layer on rank 0): with
# --tensor-exact, text and logits bit for bit as one process on one device;
# with partial sums, bit for bit as one process's -sm expert over
# cpu:0,cpu:1,... (each device's sum of its own experts, added in the same
# order).
cli_expert() { # MODEL RANKS LABEL EXACT(exact|partial)
  local baton="$target/release/baton" ranks=$2 exact=$4 devices local rc=0 args oracle
  devices=$(seq -s, 0 $((ranks - 1)) | sed 's/\([0-9]\+\)/cpu@\1/g')
  local=$(seq -s, 0 $((ranks - 1)) | sed 's/\([0-9]\+\)/cpu:\1/g')
  args=(run -m "$1" -p "The capital of France is" -n 12 --temp 0 -t 1)
  if [ "$exact" = exact ]; then
    oracle="one process on one device"
    timeout 120 "$baton" "${args[@]}" --devices cpu --logits-out "$work/one.bin" >"$work/one.out" 2>/dev/null || rc=$?
    args+=(-sm expert --tensor-exact)
  else
    oracle="one process's -sm expert over $local"
    args+=(-sm expert)
    timeout 120 "$baton" "${args[@]}" --devices "$local" --logits-out "$work/one.bin" >"$work/one.out" 2>/dev/null || rc=$?
  fi
  timeout 300 scripts/mpirun.sh -np "$ranks" "$baton" "${args[@]}" --devices "$devices" \
    --logits-out "$work/ranks.bin" >"$work/ranks.out" 2>"$work/ranks.err" || rc=$?
  if [ "$rc" != 0 ] || [ ! -s "$work/one.bin" ] || ! cmp -s "$work/one.out" "$work/ranks.out" \
    || ! cmp -s "$work/one.bin" "$work/ranks.bin"; then
    cat "$work/ranks.err" >&2
    fail "-sm expert ($exact) over $ranks ranks on $3 (exit $rc): text or logits differ from $oracle"
  else
    echo "ok: -sm expert ($exact) over $ranks ranks on $3: text and logits bit for bit as $oracle"
  fi
}

cli_conformance() { # POLICY
  local out rc=0 passed
  out=$(BATON_WAIT_POLICY=$1 timeout 120 scripts/mpirun.sh -np 2 -x BATON_WAIT_POLICY "$target/release/baton" \
    conformance --devices cpu@0,cpu@1 2>&1) || rc=$?
  passed=$(printf '%s\n' "$out" | grep -c '^  pass ' || true)
  if [ "$rc" != 0 ] || [ "$passed" != 7 ] || ! printf '%s\n' "$out" | grep -q '^  expected  ranks    w_foreign' \
    || ! printf '%s\n' "$out" | grep -q ', 0 failed$'; then
    printf '%s\n' "$out" >&2
    fail "baton conformance across 2 ranks, policy $1 (exit $rc, $passed of 7 rules passed)"
  else
    echo "ok: baton conformance across 2 ranks, policy $1: 7 rules pass, W-FOREIGN an expected failure"
  fi
}

cli_bench() {
  local out rc=0
  out=$(timeout 300 scripts/mpirun.sh -np 2 "$target/release/baton" bench -m "$1" -p 16 -n 8 -r 1 \
    --devices cpu@0,cpu@1 -t 1 2>&1) || rc=$?
  if [ "$rc" != 0 ] || ! printf '%s\n' "$out" | grep -q '| tg8 |'; then
    printf '%s\n' "$out" >&2
    fail "baton bench over 2 ranks (exit $rc)"
  else
    echo "ok: baton bench over 2 ranks"
  fi
}

# A launch that must fail on every rank, saying WHY on each.
bad_launch() { # LABEL WHY mpirun-arguments...
  local label=$1 why=$2 out rc=0 said
  shift 2
  out=$(timeout 120 scripts/mpirun.sh "$@" 2>&1) || rc=$?
  said=$(printf '%s\n' "$out" | { grep -o "$why" || true; } | wc -l)
  if [ "$rc" = 0 ] || [ "$rc" = 124 ] || [ "$said" != 2 ]; then
    printf '%s\n' "$out" >&2
    fail "bad launch, $label (exit $rc, $said of 2 ranks said why)"
  else
    echo "ok: bad launch, $label: an error on every rank"
  fi
}

# `baton run` over 2 ranks; rank 1 stops (SIGSTOP) mid-decode: rank 0 must
# fail within the deadline naming it, and the job exit non-zero (layer
# split: rank 0 waits on a receive; with `-sm tensor`, on a gate).
cli_silent() { # MODEL [EXTRA...]
  local started ended tpid rank_pid="" rc=0 model=$1
  shift
  started=$(date +%s)
  BATON_REMOTE_DEADLINE=3 timeout 60 scripts/mpirun.sh -np 2 -x BATON_REMOTE_DEADLINE "$target/release/baton" run \
    -m "$model" -p "Once upon a time" -n 100000 --temp 0 --devices cpu@0,cpu@1 -t 1 "$@" >/dev/null 2>"$work/silent.err" &
  tpid=$!
  sleep 4
  rank_pid=$(rank_pid "$tpid" 1)
  [ -n "$rank_pid" ] && kill -STOP "$rank_pid"
  wait "$tpid" || rc=$?
  ended=$(date +%s)
  [ -n "$rank_pid" ] && kill -CONT "$rank_pid" 2>/dev/null
  if [ -z "$rank_pid" ] || [ "$rc" = 0 ] || [ "$rc" = 124 ] || ! grep -q 'silent rank(s) \[1\]' "$work/silent.err"; then
    cat "$work/silent.err" >&2
    fail "baton run $* with rank 1 stopped mid-decode (exit $rc, rank pid ${rank_pid:-not found})"
  else
    echo "ok: baton run $* with rank 1 stopped mid-decode: rank 0 named it, job exit $rc after $((ended - started)) s (stopped at 4 s)"
  fi
}

# `baton serve` over 2 ranks (`-sm layer`, or `tensor --tensor-exact`, whose
# logits are one device's bit for bit, so the greedy answers the test
# checks are one process's): the openai client test (scripts/test-serve.sh,
# embeddings refused over ranks).
serve_ranks() { # SPLIT
  local rc=0
  BATON_SERVE_RANKS=2 BATON_SERVE_SPLIT=$1 BATON_BIN="$target/release/baton" timeout 300 \
    bash scripts/test-serve.sh >"$work/serve.out" 2>&1 || rc=$?
  if [ "$rc" != 0 ]; then
    tail -n 40 "$work/serve.out" >&2
    fail "baton serve over 2 ranks, -sm $1: the openai client test (exit $rc)"
  else
    echo "ok: baton serve over 2 ranks, -sm $1: the openai client test passed"
  fi
}

# The address `baton serve` printed in log $1 (waits up to 60 s).
served_at() { # LOG
  local addr="" i
  for i in $(seq 600); do
    addr=$(grep -o 'listening on http://[0-9.:]*' "$1" | head -n1 | sed 's/listening on //') || true
    [ -n "$addr" ] && break
    sleep 0.1
  done
  echo "$addr"
}

# `baton serve` over 2 ranks gives one process's greedy text; then rank 1
# stops (SIGSTOP) mid-stream: the stream must end with an error event
# naming the silent rank (not a cut stream), and the job exit non-zero
# within the deadline.
serve_stopped() { # MODEL
  local one="$work/serve-one.log" two="$work/serve-two.log" addr pid tpid rank_pid="" rc=0 started ended
  local body='{"prompt": "The capital of France is", "max_tokens": 24, "temperature": 0}'
  "$target/release/baton" serve -m "$1" --host 127.0.0.1 --port 0 -t 1 2>"$one" &
  pid=$!
  addr=$(served_at "$one")
  local want got
  want=$(curl -s "$addr/v1/completions" -d "$body" | grep -o '"text":"[^"]*"')
  kill -INT "$pid"
  wait "$pid" || true
  BATON_REMOTE_DEADLINE=3 timeout 90 scripts/mpirun.sh -np 2 -x BATON_REMOTE_DEADLINE "$target/release/baton" serve \
    -m "$1" --host 127.0.0.1 --port 0 --devices cpu@0,cpu@1 -t 1 2>"$two" &
  tpid=$!
  addr=$(served_at "$two")
  got=$(curl -s "$addr/v1/completions" -d "$body" | grep -o '"text":"[^"]*"')
  curl -sN "$addr/v1/completions" -d '{"prompt": "Once upon a time", "max_tokens": 2000, "stream": true,
    "ignore_eos": true}' >"$work/serve-stream.out" 2>/dev/null &
  sleep 1
  started=$(date +%s)
  rank_pid=$(rank_pid "$tpid" 1)
  [ -n "$rank_pid" ] && kill -STOP "$rank_pid"
  wait "$tpid" || rc=$?
  ended=$(date +%s)
  [ -n "$rank_pid" ] && kill -CONT "$rank_pid" 2>/dev/null
  if [ -z "$want" ] || [ "$want" != "$got" ]; then
    fail "baton serve over 2 ranks: greedy text $got, one process $want"
  else
    echo "ok: baton serve over 2 ranks: the greedy text of one process"
  fi
  if [ -z "$rank_pid" ] || [ "$rc" = 0 ] || [ "$rc" = 124 ] || [ $((ended - started)) -gt 20 ] ||
    ! grep -q '"error".*silent rank(s) \[1\]' "$work/serve-stream.out" || grep -q 'DONE' "$work/serve-stream.out"; then
    tail -c 600 "$work/serve-stream.out" >&2
    tail -n 20 "$two" >&2
    fail "baton serve over 2 ranks with rank 1 stopped mid-stream (exit $rc after $((ended - started)) s)"
  else
    echo "ok: baton serve over 2 ranks with rank 1 stopped mid-stream: an error event named it, job exit $rc after $((ended - started)) s"
  fi
}

# `baton run -sm tensor` over 2 ranks; rank 1 is killed (SIGKILL)
# mid-decode: mpirun must end the job with a non-zero status well before
# the 30 s deadline.
cli_killed() { # MODEL
  local started ended tpid rank_pid="" rc=0
  started=$(date +%s)
  timeout 60 scripts/mpirun.sh -np 2 "$target/release/baton" run -m "$1" -p "Once upon a time" -n 100000 --temp 0 \
    --devices cpu@0,cpu@1 -t 1 -sm tensor >/dev/null 2>"$work/killed.err" &
  tpid=$!
  sleep 4
  rank_pid=$(rank_pid "$tpid" 1)
  [ -n "$rank_pid" ] && kill -KILL "$rank_pid"
  wait "$tpid" || rc=$?
  ended=$(date +%s)
  if [ -z "$rank_pid" ] || [ "$rc" = 0 ] || [ "$rc" = 124 ] || [ $((ended - started)) -gt 20 ]; then
    cat "$work/killed.err" >&2
    fail "baton run -sm tensor with rank 1 killed mid-decode (exit $rc after $((ended - started)) s, rank pid ${rank_pid:-not found})"
  else
    echo "ok: baton run -sm tensor with rank 1 killed mid-decode: mpirun ended the job, exit $rc after $((ended - started)) s (killed at 4 s)"
  fi
}

cli_bad_launches() { # MODEL
  local baton="$target/release/baton"
  mkdir -p "$work/a" "$work/b" "$work/c"
  cp "$1" "$work/a/x.gguf"
  cp "$1" "$work/c/x.gguf"
  printf 'X' | dd of="$work/c/x.gguf" bs=1 seek=200 conv=notrunc status=none
  "$baton" model synth --shape tiny --type q8_0 -o "$work/b/x.gguf" >/dev/null 2>&1
  local run=(run -m x.gguf -p hi -n 4 --devices cpu@0,cpu@1 -t 1)
  bad_launch "another model file" 'ranks \[1\] differ from rank 0 in the model file x.gguf' \
    -np 1 -wdir "$work/a" "$baton" "${run[@]}" : -np 1 -wdir "$work/b" "$baton" "${run[@]}"
  bad_launch "another header, same size" 'ranks \[1\] differ from rank 0 in the model file x.gguf' \
    -np 1 -wdir "$work/a" "$baton" "${run[@]}" : -np 1 -wdir "$work/c" "$baton" "${run[@]}"
  bad_launch "other arguments" 'ranks \[1\] differ from rank 0 in the command line' \
    -np 1 -wdir "$work/a" "$baton" "${run[@]}" : -np 1 -wdir "$work/a" "$baton" "${run[@]/#4/5}"
  local two_on_0=(run -m x.gguf -p hi -n 4 --devices cpu:0@0,cpu:1@0 -t 1 -sm tensor)
  bad_launch "-sm tensor with no device on rank 1" 'split-mode tensor over ranks needs one device on each of the job.s 2 ranks' \
    -np 2 -wdir "$work/a" "$baton" "${two_on_0[@]}"
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$target/release/baton" model synth --shape tiny --type q4_1 -o "$work/tiny.gguf" >/dev/null 2>&1
"$target/release/baton" model synth --shape qwen3moe --type q8_0 -o "$work/qwen3moe.gguf" >/dev/null 2>&1
"$target/release/baton" model synth --shape gpt-oss --type q8_0 -o "$work/gpt-oss.gguf" >/dev/null 2>&1
"$target/release/baton" model synth --shape qwen35moe --type q8_0 -o "$work/qwen35moe.gguf" >/dev/null 2>&1
smollm2=$(bash scripts/fetch-smollm2.sh | tail -1)

collectives 2 block
collectives 2 poll
collectives 3 block
split 2
split 3
silent 2 1 3
silent 3 1 3
silent 3 0 3
failing 2 1
failing 3 1
killed 2 1
killed 3 2
cli_devices
cli_run "$work/tiny.gguf" 2 "the tiny synthetic model"
cli_run "$work/tiny.gguf" 3 "the tiny synthetic model"
cli_run "$smollm2" 2 SmolLM2
cli_run "$smollm2" 3 SmolLM2
cli_run "$work/tiny.gguf" 2 "the tiny synthetic model, first layers on rank 1" cpu@1,cpu@0
cli_run "$work/tiny.gguf" 2 "the tiny synthetic model, two devices on rank 0" cpu:0@0,cpu:1@0,cpu@1
# Mixtures of experts split by layer over ranks (issue 47): each rank holds
# its layers' experts.
cli_run "$work/qwen3moe.gguf" 2 "the qwen3moe synthetic model"
cli_run "$work/gpt-oss.gguf" 2 "the gpt-oss synthetic model (sinks, YaRN, sliding layers)"
# A hybrid model split by layer (issue 47 step 3): each rank holds its
# recurrent layers' state.
cli_run "$work/qwen35moe.gguf" 2 "the qwen35moe synthetic model (recurrent layers)"
# The experts split over ranks (issue 47 step 5): each rank holds its share.
for ranks in 2 3; do
  for exact in exact partial; do
    cli_expert "$work/qwen3moe.gguf" "$ranks" "the qwen3moe synthetic model" "$exact"
    cli_expert "$work/gpt-oss.gguf" "$ranks" "the gpt-oss synthetic model (expert biases)" "$exact"
    cli_expert "$work/qwen35moe.gguf" "$ranks" "the qwen35moe synthetic model (recurrent layers)" "$exact"
  done
done
cli_tensor "$work/tiny.gguf" 2 "the tiny synthetic model" exact mpi
cli_tensor "$work/tiny.gguf" 2 "the tiny synthetic model" exact butterfly
cli_tensor "$work/tiny.gguf" 2 "the tiny synthetic model" partial mpi
cli_tensor "$work/tiny.gguf" 2 "the tiny synthetic model, uneven shares, rank 1 first" exact mpi cpu@1,cpu@0 -ts 3,1
cli_tensor "$work/tiny.gguf" 3 "the tiny synthetic model" exact mpi
cli_tensor "$work/tiny.gguf" 3 "the tiny synthetic model" partial mpi
cli_tensor "$work/tiny.gguf" 3 "the tiny synthetic model" partial butterfly
cli_tensor "$smollm2" 2 SmolLM2 exact mpi
cli_tensor "$smollm2" 2 SmolLM2 exact butterfly
cli_tensor "$smollm2" 2 SmolLM2 partial mpi
cli_tensor "$smollm2" 2 SmolLM2 partial butterfly
cli_run "$smollm2" 2 "SmolLM2, q8_0 KV cache" "" -ctk q8_0 -ctv q8_0
cli_tensor "$smollm2" 2 "SmolLM2, q8_0 KV cache" exact mpi "" -ctk q8_0 -ctv q8_0
# Gemma 3's one key head is held by both ranks (their query heads share it):
# the all-gather of shared segments. Where the file is in the model cache
# (the CLI's model tests fetch it), as the memory check does.
gemma="${BATON_CACHE_DIR:-$HOME/.cache/baton}/models/gemma-3-270m-q4_k_m.gguf"
if [ -f "$gemma" ]; then
  cli_tensor "$gemma" 2 "Gemma 3 270M" exact mpi
  cli_tensor "$gemma" 2 "Gemma 3 270M" partial mpi
fi
cli_bench "$work/tiny.gguf"
cli_conformance block
cli_conformance spin
cli_conformance poll
cli_bad_launches "$work/tiny.gguf"
cli_silent "$smollm2"
cli_silent "$smollm2" -sm tensor
cli_killed "$smollm2"
serve_ranks layer
serve_ranks "tensor --tensor-exact"
serve_stopped "$smollm2"

if [ "$failures" != 0 ]; then
  echo "$failures MPI test(s) failed" >&2
  exit 1
fi
echo "all MPI tests passed"
