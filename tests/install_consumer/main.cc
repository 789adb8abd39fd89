// Uses the installed headers and both exported libraries: a tensor on a CPU worker
// stream (phi) and an all-reduce through a one-rank Gloo process group (distributed).
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "distributed/process_group_gloo.h"
#include "phi/core/cpu_stream.h"
#include "phi/core/dense_tensor.h"
#include "phi/core/distributed/store/hash_store.h"
#include "phi/core/errors.h"

int main() {
  phi::CpuWorkerStream stream("consumer");
  auto t = phi::DenseTensor::FromVector(std::vector<float>{1, 2, 3, 4});
  stream.Launch([&t] { t.data<float>()[0] = 10.0f; });
  stream.Synchronize(std::chrono::seconds(30));

  auto store = std::make_shared<phi::distributed::HashStore>(std::chrono::seconds(30));
  auto pg = paddle_like::distributed::ProcessGroupGloo::CreateProcessGroupGloo(
      store, /*rank=*/0, /*size=*/1, /*gid=*/0, std::chrono::seconds(30));
  phi::DenseTensor out;
  pg->AllReduce(&out, t, paddle_like::distributed::AllreduceOptions{}, /*sync_op=*/true);
  std::vector<float> got = out.ToVector<float>();
  if (got != std::vector<float>{10, 2, 3, 4}) {
    std::fprintf(stderr, "consumer: unexpected all-reduce result\n");
    return 1;
  }
  try {
    PADDLE_THROW(phi::errors::NotFound("key %s", "x"));
  } catch (const phi::NotFoundError&) {
  }
  std::printf("consumer: %s all-reduce over %d rank ok\n", pg->GetBackendName().c_str(),
              pg->GetSize());
  return 0;
}
