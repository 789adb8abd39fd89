// What the MPI tests share beyond tests/harness/multiprocess.h (see mpi_harness.cc).
#pragma once

#include <chrono>
#include <memory>

#include "phi/core/distributed/store/store.h"

namespace paddle_like {
namespace testing {

// The job's store (rank 0 hosts it) and its port on 127.0.0.1.
std::shared_ptr<phi::distributed::Store> MpiTestStore();
int MpiTestStorePort();
// The store of the RunRanks call in progress (a fresh prefix of the job's store).
std::shared_ptr<phi::distributed::Store> CurrentRunStore();
// init_process_group on the MPI backend over CurrentRunStore(): each case gets keys of its
// own (env:// would reuse the job's store root in every case).
void InitMpi(std::chrono::milliseconds timeout = std::chrono::seconds(20));

}  // namespace testing
}  // namespace paddle_like
