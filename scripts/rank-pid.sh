# Sourced by the scripts that launch MPI jobs (test-mpi.sh, test-serve.sh).
#
# rank_pid ROOT_PID RANK: the pid of rank RANK under the process ROOT_PID
# (`mpirun`, or a `timeout … mpirun`; empty if not found): the descendant
# whose environment names that rank (mpirun's tree differs between Open MPI
# versions: the ranks may sit under a daemon), looked for during up to 5 s.
# The environment is read by grep itself (-z: NUL-separated): `tr | grep -q`
# under pipefail failed whenever grep's early exit cut tr off with SIGPIPE,
# and the rank then looked missing.
rank_pid() { # ROOT_PID RANK
  local tries p pids frontier next
  for tries in 1 2 3 4 5 6 7 8 9 10; do
    pids=$1
    frontier=$1
    while [ -n "$frontier" ]; do
      next=""
      for p in $frontier; do next="$next $(pgrep -P "$p" || true)"; done
      frontier=$(echo $next)
      pids="$pids $frontier"
    done
    for p in $pids; do
      if grep -qzx "OMPI_COMM_WORLD_RANK=$2" "/proc/$p/environ" 2>/dev/null; then
        echo "$p"
        return
      fi
    done
    sleep 0.5
  done
}
