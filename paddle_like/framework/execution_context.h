// ExecutionContext: what a kernel sees of the op it runs: the op, its variables in the scope,
// the place and calc stream, and the executor's pending comm ops.
#pragma once

#include <string>
#include <vector>

#include "paddle_like/framework/op_desc.h"
#include "paddle_like/framework/pending_comm.h"
#include "paddle_like/framework/scope.h"
#include "phi/core/dense_tensor.h"
#include "phi/core/device_context.h"

namespace paddle_like {
namespace framework {

// The tensor `name` (input slot `slot` of `op`) in `scope`; raises InvalidArgument naming the
// op when the variable holds no data yet (a missing variable: Scope::GetVar's NotFound).
const phi::DenseTensor& CheckedInput(const OpDesc& op, const Scope& scope, const std::string& slot,
                                     const std::string& name);

class ExecutionContext {
 public:
  ExecutionContext(const OpDesc& op, Scope* scope, phi::DeviceContext* dev_ctx,
                   PendingComm* pending)
      : op_(op), scope_(scope), dev_ctx_(dev_ctx), pending_(pending) {}

  const OpDesc& op() const { return op_; }
  const std::string& Type() const { return op_.Type(); }
  phi::Place GetPlace() const { return dev_ctx_->GetPlace(); }
  // The calc stream's context.
  phi::DeviceContext* device_context() const { return dev_ctx_; }
  PendingComm* pending_comm() const { return pending_; }

  // The slot is set and names a variable of the scope that holds a tensor.
  bool HasInput(const std::string& slot) const;
  bool HasOutput(const std::string& slot) const { return op_.HasOutput(slot); }
  // The one tensor of an input slot: NotFound when the slot or variable is missing,
  // InvalidArgument when the slot has several variables or the tensor holds no data.
  const phi::DenseTensor& Input(const std::string& slot) const;
  std::vector<const phi::DenseTensor*> MultiInput(const std::string& slot) const;
  // The tensor of an output slot, created in the scope when absent.
  phi::DenseTensor* Output(const std::string& slot) const;
  std::vector<phi::DenseTensor*> MultiOutput(const std::string& slot) const;
  // The variable name of a one-variable slot.
  const std::string& InputName(const std::string& slot) const;
  const std::string& OutputName(const std::string& slot) const;

  template <typename T>
  T Attr(const std::string& name) const {
    return op_.GetAttr<T>(name);
  }
  template <typename T>
  T AttrOr(const std::string& name, T fallback) const {
    return op_.GetAttrOr<T>(name, std::move(fallback));
  }

 private:
  const OpDesc& op_;
  Scope* scope_;
  phi::DeviceContext* dev_ctx_;
  PendingComm* pending_;
};

}  // namespace framework
}  // namespace paddle_like
