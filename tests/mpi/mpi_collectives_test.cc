// The Gloo collective matrix (every op, dtype, reduce op, world size, sync/async, in-place,
// send/recv with tags and ANY_SOURCE, coalescing), compiled a second time for
// ProcessGroupMPI: the same test text, so the two backends are held to one matrix. The
// names are swapped by the preprocessor after the real headers are in (their include guards
// keep them from being read again under the new names).
#include "distributed/process_group_gloo.h"
#include "distributed/process_group_mpi.h"
#include "tests/distributed/collective_test_util.h"
#include "tests/harness/multiprocess.h"

#define ProcessGroupGloo ProcessGroupMPI
#define GlooCollectives MpiCollectives
#include "tests/distributed/gloo_collectives_test.cc"  // NOLINT(build/include)
#undef GlooCollectives
#undef ProcessGroupGloo
