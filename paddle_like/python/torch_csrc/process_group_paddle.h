// paddle_like as a torch.distributed backend: a c10d::ProcessGroup (torch 1.13's interface)
// whose every op runs on this project's engine (a paddle_like::distributed::ProcessGroup:
// "gloo" for CPU tensors, "nccl" for CUDA tensors where the build has it).
//
// Tensors are not copied: each at::Tensor is viewed as a phi::DenseTensor whose Allocation
// holds the tensor's c10::Storage, so the storage lives until the engine is done with it.
// Ops whose torch form is a list of separate tensors that the engine wants as one buffer
// (allgather, scatter, reduce_scatter, allgather_coalesced) use the list directly when its
// tensors are consecutive in one storage and stage through one buffer otherwise.
//
// Completion: a CPU collective's Work is completed by a job queued on the group's comm
// stream right behind the op (no polling, no thread per op); the Work's future is marked by
// one completion thread per group, so that future callbacks (DDP comm hooks) never run on
// the comm stream and may issue and wait for more collectives. Point-to-point ops, CUDA ops
// and coalesced groups (which run off the comm stream) are polled by that same thread when
// somebody asked for their future; wait() needs no thread.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "distributed/process_group.h"
#include "phi/core/distributed/store/store.h"

namespace paddle_like {
namespace torch_backend {

class Completer;
class PaddleWork;

class ProcessGroupPaddle : public c10d::ProcessGroup {
 public:
  // `gid`: the engine's group id, the same on every member (derived from torch's group name).
  ProcessGroupPaddle(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                     std::chrono::milliseconds timeout, int gid);
  ~ProcessGroupPaddle() override;

  const std::string getBackendName() const override { return "paddle_like"; }

  void startCoalescing() override;
  void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& reqs) override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override;

  // The engine group serving `device` (created on first use for CUDA).
  distributed::ProcessGroup* Engine(const at::Device& device);

 private:
  struct Issue;  // one op's description (the .cc)
  c10::intrusive_ptr<c10d::Work> Run(Issue issue);

  c10::intrusive_ptr<c10d::Store> torch_store_;
  std::shared_ptr<phi::distributed::Store> store_;
  std::chrono::milliseconds timeout_;
  int gid_;
  std::shared_ptr<Completer> completer_;
  std::mutex mu_;
  std::shared_ptr<distributed::ProcessGroup> cpu_;
  std::shared_ptr<distributed::ProcessGroup> cuda_;
  int cuda_device_ = -1;
  // Between startCoalescing and endCoalescing: the engine group, and the Works to finish.
  distributed::ProcessGroup* coalescing_ = nullptr;
  std::vector<c10::intrusive_ptr<PaddleWork>> coalesced_;
  uint64_t monitored_barriers_ = 0;
};

// torch's creator: `group_name` is torch's name of the group (the same on every member).
c10::intrusive_ptr<c10d::ProcessGroup> CreateProcessGroupPaddle(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout, const std::string& group_name);

}  // namespace torch_backend
}  // namespace paddle_like
