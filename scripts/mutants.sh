#!/usr/bin/env bash
# Mutation testing of the sync core (issue 15): cargo-mutants over
# baton-core's src/sync and src/backend, each mutant tested by the tests of
# baton-core and baton-cpu (the CPU backend runs the contract suite). The
# globs, test packages and the equivalent mutants (with reasons) are in
# .cargo/mutants.toml. Every wait in those tests has a bound, so a mutant
# that breaks signalling fails its rule by name within RULE_TIMEOUT instead
# of running into cargo-mutants' timeout. Not part of CI: a full run takes
# hours on a 2-core machine.
#
# Usage: scripts/mutants.sh [extra cargo-mutants args, e.g. --iterate, or -F REGEX]
# FILES (default: baton-core's src/sync/*.rs and src/backend/*.rs) narrows the files.
# Needs cargo-mutants 27 (`cargo install --locked cargo-mutants`).
# Output: target/mutants/mutants.out (outcomes.json, caught.txt, missed.txt,
# timeout.txt, unviable.txt, logs/; OUT overrides the folder). JOBS (default 1) and TIMEOUT (seconds
# per mutant's tests, default 300) override. The suite passes in seconds,
# but a mutant that breaks signalling fails up to every rule at its first
# bounded wait (RULE_TIMEOUT, 10 s), 16 tests at a time: they fail by name
# within a few minutes, and a shorter TIMEOUT would count them as hangs.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-target/mutants}
mkdir -p "$OUT"
status=0
FILES=${FILES:-crates/baton-core/src/sync/*.rs crates/baton-core/src/backend/*.rs}
file_args=()
for f in $FILES; do file_args+=(-f "$f"); done
# One job builds in one shared target folder, so later runs reuse the
# dependencies (several jobs would overwrite each other's test binaries).
if [ "${JOBS:-1}" = 1 ]; then export CARGO_TARGET_DIR=$PWD/target/mutants/cargo-target; fi
# No debug info, and the workspace's crates unoptimised: each mutant
# rebuilds baton-core and everything above it, and that build, not the
# tests (seconds), is most of a mutant's time.
export CARGO_PROFILE_DEV_DEBUG=0 CARGO_PROFILE_DEV_OPT_LEVEL=0
cargo mutants --output "$OUT" --jobs "${JOBS:-1}" --timeout "${TIMEOUT:-300}" "${file_args[@]}" "$@" || status=$?
dir=$OUT/mutants.out
count() { [ -f "$dir/$1.txt" ] && wc -l <"$dir/$1.txt" || echo 0; }
echo "caught $(count caught), timeout $(count timeout), missed $(count missed), unviable $(count unviable)"
for kind in missed timeout; do
  [ -s "$dir/$kind.txt" ] && { echo "-- $kind:"; cat "$dir/$kind.txt"; }
done
# cargo-mutants exits 2 when a mutant was missed, 3 on timeouts, 0 when all were caught.
exit "$status"
