#!/usr/bin/env bash
# What the `mpi` feature (crates/baton-mpi) needs: Open MPI (the runtime,
# `mpirun`, and its headers and libraries) and libclang (rsmpi generates its
# bindings with bindgen at build time). Installs them with apt when missing,
# idempotently, then prints the path of `mpirun`. Fails loudly when it cannot
# be found afterwards: the MPI tests must run, not skip.
set -euo pipefail

# (No `grep -q` after a pipe: under pipefail its early exit would fail the
# writer with SIGPIPE and make an installed package look missing.)
have_all() {
  command -v mpirun >/dev/null 2>&1 \
    && command -v mpicc >/dev/null 2>&1 \
    && [ -n "$(ls /usr/lib/llvm-*/lib/libclang.so* /usr/lib/*/libclang*.so* 2>/dev/null | head -n 1 || true)" ] \
    && ldconfig -p | grep 'libmpi\.so' >/dev/null
}

if ! have_all; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Open MPI and libclang (openmpi-bin libopenmpi-dev libclang-dev)..." >&2
    # Update the package lists only when they are missing or a first try fails.
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      openmpi-bin libopenmpi-dev libclang-dev >&2; then
      apt-get update -qq >&2
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        openmpi-bin libopenmpi-dev libclang-dev >&2
    fi
  else
    echo "Open MPI or libclang is missing; as root: apt-get install openmpi-bin libopenmpi-dev libclang-dev" >&2
  fi
fi

mpirun_path=$(command -v mpirun || true)
if [ -z "$mpirun_path" ] || ! have_all; then
  echo "error: Open MPI (mpirun, mpicc, libmpi.so) or libclang not found after setup" >&2
  exit 1
fi
echo "$mpirun_path"
