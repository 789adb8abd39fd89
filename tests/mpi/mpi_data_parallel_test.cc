// DataParallel on MPI: the DataParallel suite (N ranks on shards end with the weights of one
// process on the whole batch, buckets, no_sync, unused parameters, hooks, errors) compiled
// for the MPI backend: each case's init_process_group is InitMpi instead of InitGloo.
#include "tests/mpi/mpi_test_util.h"
#include "tests/nn/nn_test_util.h"
#include "tests/paddle_like/dist_test_util.h"

#define InitGloo InitMpi
#include "tests/nn/data_parallel_test.cc"  // NOLINT(build/include)
#undef InitGloo
