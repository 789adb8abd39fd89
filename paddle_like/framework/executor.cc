#include "paddle_like/framework/executor.h"

#include <glog/logging.h>

#include <exception>
#include <string>

#include "paddle_like/framework/execution_context.h"
#include "paddle_like/framework/kernel_registry.h"
#include "paddle_like/framework/var_type.h"
#include "phi/core/errors.h"

namespace paddle_like {
namespace framework {

Executor::Executor(const phi::Place& place)
    : place_(place), calc_ctx_(phi::DeviceContextPool::Instance().Get(place)) {}

Executor::~Executor() {
  try {
    pending_.WaitAll();
  } catch (const std::exception& e) {
    LOG(ERROR) << "Executor: a pending comm op failed while the executor was destroyed: "
               << e.what();
  }
}

phi::DataType Executor::KernelDataType(const OpDesc& op, const Scope& scope) const {
  if (op.HasAttr("dtype")) return FromVarType(op.GetAttr<int>("dtype"));
  const std::string slot = KernelRegistry::Instance().KeyInput(op.Type());
  if (op.HasInput(slot)) {
    // A missing or empty variable is named here rather than as "no kernel for any dtype".
    return CheckedInput(op, scope, slot, op.Input(slot)[0]).dtype();
  }
  return phi::DataType::UNDEFINED;
}

void Executor::RunOp(const OpDesc& op, Scope* scope) {
  // The consumer's event: an op that reads or writes a tensor of a pending comm op is
  // ordered after it (nothing to do on the common path, where nothing is pending).
  if (!pending_.empty()) {
    std::vector<std::string> vars;
    for (const auto& kv : op.Inputs()) vars.insert(vars.end(), kv.second.begin(), kv.second.end());
    for (const auto& kv : op.Outputs()) vars.insert(vars.end(), kv.second.begin(), kv.second.end());
    pending_.WaitForVars(vars);
  }
  KernelFn fn = KernelRegistry::Instance().Find(
      KernelKey{op.Type(), place_.GetType(), KernelDataType(op, *scope)});
  ExecutionContext ctx(op, scope, calc_ctx_, &pending_);
  fn(ctx);
}

void Executor::Run(const ProgramDesc& program, Scope* scope) {
  for (size_t i = 0; i < program.ops.size(); ++i) {
    try {
      RunOp(program.ops[i], scope);
    } catch (...) {
      phi::RethrowWithContext(std::current_exception(),
                              "op #" + std::to_string(i) + " " + program.ops[i].DebugString());
    }
  }
}

}  // namespace framework
}  // namespace paddle_like
