// Executor: runs a program's ops in order on one place's calc stream.
//
// For each op it first waits for the pending comm ops (use_calc_stream=false) that touch the
// op's variables, then finds the kernel by (op type, place type, dtype) and runs it. Errors
// keep their type and gain the op's index and description.
#pragma once

#include "paddle_like/framework/execution_context.h"
#include "paddle_like/framework/op_desc.h"
#include "paddle_like/framework/pending_comm.h"
#include "paddle_like/framework/scope.h"
#include "phi/core/device_context.h"
#include "phi/core/place.h"

namespace paddle_like {
namespace framework {

class Executor {
 public:
  explicit Executor(const phi::Place& place = phi::CPUPlace());
  // Waits for the comm ops still pending (their tensors may be in a scope that outlives it).
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  void Run(const ProgramDesc& program, Scope* scope);
  void RunOp(const OpDesc& op, Scope* scope);
  // Orders the calc stream after every pending comm op (and forgets them).
  void WaitPendingComm() { pending_.WaitAll(); }
  size_t NumPendingComm() const { return pending_.size(); }
  const phi::Place& place() const { return place_; }

 private:
  phi::DataType KernelDataType(const OpDesc& op, const Scope& scope) const;
  phi::Place place_;
  phi::DeviceContext* calc_ctx_;
  PendingComm pending_;
};

}  // namespace framework
}  // namespace paddle_like
