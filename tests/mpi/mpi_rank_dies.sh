#!/bin/sh
# A rank that exits mid-run under mpirun: the job must end (mpirun kills the survivors and
# exits non-zero), well before the group's 60 s timeout.
# Usage: mpi_rank_dies.sh MPIEXEC TEST_EXE [MPIEXEC_FLAGS...]
mpiexec=$1
exe=$2
shift 2
start=$(date +%s)
out=$(PADDLE_MPI_RANK_DIES=1 "$mpiexec" "$@" -np 2 -x PADDLE_MPI_RANK_DIES "$exe" \
      --gtest_filter='MpiRankDies.*' 2>&1)
rc=$?
elapsed=$(( $(date +%s) - start ))
echo "$out" | tail -25
echo "mpi_rank_dies: mpirun exit code $rc after ${elapsed}s"
[ "$rc" -ne 0 ] || { echo "FAIL: the job did not fail"; exit 1; }
[ "$elapsed" -lt 40 ] || { echo "FAIL: took ${elapsed}s: a survivor waited for the timeout"; exit 1; }
echo "$out" | grep -q "rank 1 exits now" || { echo "FAIL: the rank never exited"; exit 1; }
echo "PASS"
