// The built-in operator families; each file registers its own ops and kernels.
// RegisterBuiltinOperators (builtin_operators.cc) calls all of them once.
#pragma once

#include "paddle_like/framework/kernel_registry.h"

namespace paddle_like {
namespace operators {

using framework::KernelRegistry;

void RegisterReduceOps(KernelRegistry* r);          // c_allreduce_*, mp_allreduce_sum, c_reduce_*
void RegisterGatherScatterOps(KernelRegistry* r);   // c_broadcast, c_allgather, ..., alltoall
void RegisterModelParallelOps(KernelRegistry* r);   // c_concat, c_split, c_identity
void RegisterP2POps(KernelRegistry* r);             // send_v2, recv_v2, partial_*
void RegisterSyncOps(KernelRegistry* r);            // barrier, c_sync_calc/comm_stream
void RegisterVocabParallelOps(KernelRegistry* r);   // c_embedding, c_softmax_with_cross_entropy
void RegisterExpertParallelOps(KernelRegistry* r);  // global_scatter, global_gather
void RegisterMathOps(KernelRegistry* r);            // matmul_v2, elementwise_add, ... + grads

// The dtypes the collective ops move on CPU (Gloo): every real type. Reductions refuse
// bool (they are registered without it).
inline void RegisterCommKernel(KernelRegistry* r, const char* op, framework::KernelFn fn) {
  r->RegisterTypes<bool, int8_t, uint8_t, int32_t, int64_t, phi::dtype::float16,
                   phi::dtype::bfloat16, float, double>(op, phi::AllocationType::CPU, fn);
}
inline void RegisterReduceKernel(KernelRegistry* r, const char* op, framework::KernelFn fn) {
  r->RegisterTypes<int8_t, uint8_t, int32_t, int64_t, phi::dtype::float16, phi::dtype::bfloat16,
                   float, double>(op, phi::AllocationType::CPU, fn);
}

}  // namespace operators
}  // namespace paddle_like
