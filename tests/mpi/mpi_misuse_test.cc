// The Gloo misuse matrix compiled for ProcessGroupMPI: every bad call gives the same typed
// error on MPI (see mpi_collectives_test.cc for how the names are swapped).
#include "distributed/process_group_gloo.h"
#include "distributed/process_group_mpi.h"
#include "tests/distributed/collective_test_util.h"
#include "tests/harness/multiprocess.h"

#define ProcessGroupGloo ProcessGroupMPI
#define GlooMisuse MpiMisuse
#include "tests/distributed/gloo_misuse_test.cc"  // NOLINT(build/include)
#undef GlooMisuse
#undef ProcessGroupGloo
