#!/usr/bin/env bash
# Launches an MPI job with what Open MPI needs on these machines:
# - as root (CI), OMPI_ALLOW_RUN_AS_ROOT and its confirmation;
# - no UCX (OMPI_MCA_pml=^ucx): Debian's build links it, and it prints
#   errors on machines without RDMA devices;
# - no single-copy shared memory mechanism (OMPI_MCA_btl_vader_single_copy_mechanism=none):
#   containers forbid the cross-process memory calls it uses;
# - --oversubscribe: more ranks than cores is allowed (tests run 3 ranks on 2).
# Usage: scripts/mpirun.sh -np 2 <program> [args...]  (all mpirun options pass through)
set -euo pipefail
if ! command -v mpirun >/dev/null 2>&1; then
  echo "error: mpirun not found; run scripts/setup-mpi.sh" >&2
  exit 1
fi
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OMPI_MCA_pml=^ucx
export OMPI_MCA_btl_vader_single_copy_mechanism=none
exec mpirun --oversubscribe "$@"
