#include "paddle_like/operators/register_ops.h"

namespace paddle_like {
namespace framework {

void RegisterBuiltinOperators(KernelRegistry* r) {
  operators::RegisterReduceOps(r);
  operators::RegisterGatherScatterOps(r);
  operators::RegisterModelParallelOps(r);
  operators::RegisterP2POps(r);
  operators::RegisterSyncOps(r);
  operators::RegisterVocabParallelOps(r);
  operators::RegisterExpertParallelOps(r);
  operators::RegisterMathOps(r);
}

}  // namespace framework
}  // namespace paddle_like
