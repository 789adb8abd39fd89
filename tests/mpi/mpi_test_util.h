// What the MPI tests share beyond tests/harness/multiprocess.h (see mpi_harness.cc).
#pragma once

#include <memory>

#include "phi/core/distributed/store/store.h"

namespace paddle_like {
namespace testing {

// The job's store (rank 0 hosts it) and its port on 127.0.0.1.
std::shared_ptr<phi::distributed::Store> MpiTestStore();
int MpiTestStorePort();

}  // namespace testing
}  // namespace paddle_like
