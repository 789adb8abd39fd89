// The paddle_like::dist world of the GPU tests: one rank on device 0, NCCL only, over an
// in-process store (one rank needs no rendezvous).
#pragma once

#include <chrono>
#include <memory>

#include "paddle_like/dist/distributed.h"
#include "phi/core/distributed/store/hash_store.h"

namespace paddle_like {
namespace testing {

inline void InitNcclWorldOfOne() {
  dist::InitOptions o;
  o.backend = "nccl";
  o.store = std::make_shared<phi::distributed::HashStore>(std::chrono::seconds(30));
  o.rank = 0;
  o.world_size = 1;
  o.device_id = 0;
  dist::init_process_group(o);
}

}  // namespace testing
}  // namespace paddle_like
