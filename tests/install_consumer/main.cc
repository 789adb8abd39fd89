// Uses the installed headers and the exported libraries: a tensor on a CPU worker stream
// (phi), an all-reduce through a one-rank Gloo process group (distributed), and a program
// whose c_allreduce_sum finds that group by ring id (framework: the built-in operators are
// there when linked from the installed static library).
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "distributed/process_group_gloo.h"
#include "paddle_like/framework/executor.h"
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
  paddle_like::framework::Scope scope;
  *scope.Var("x") = phi::DenseTensor::FromVector(std::vector<double>{1, 2});
  paddle_like::framework::ProgramDesc program;
  program.AppendOp("c_allreduce_sum")
      .SetInput("X", {"x"})
      .SetOutput("Out", {"y"})
      .SetAttr("ring_id", 0)
      .SetAttr("use_calc_stream", true);
  program.AppendOp("scale").SetInput("X", {"y"}).SetOutput("Out", {"z"}).SetAttr("scale", 3.0);
  paddle_like::framework::Executor().Run(program, &scope);
  if (scope.GetVar("z")->ToVector<double>() != std::vector<double>{3, 6}) {
    std::fprintf(stderr, "consumer: unexpected program result\n");
    return 1;
  }
  try {
    PADDLE_THROW(phi::errors::NotFound("key %s", "x"));
  } catch (const phi::NotFoundError&) {
  }
  std::printf("consumer: %s all-reduce over %d rank and a framework program ok\n",
              pg->GetBackendName().c_str(), pg->GetSize());
  return 0;
}
