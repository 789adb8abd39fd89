#include "paddle_like/framework/execution_context.h"

#include "phi/core/errors.h"

namespace paddle_like {
namespace framework {

namespace {
const std::string& OneName(const OpDesc& op, const std::vector<std::string>& names,
                           const std::string& slot) {
  PADDLE_ENFORCE(names.size() == 1,
                 phi::errors::InvalidArgument(
                     "Slot '%s' of operator %s must name exactly one variable, it names %zu.",
                     slot.c_str(), op.DebugString().c_str(), names.size()));
  return names[0];
}
}  // namespace

const phi::DenseTensor& CheckedInput(const OpDesc& op, const Scope& scope, const std::string& slot,
                                     const std::string& name) {
  const phi::DenseTensor* t = scope.GetVar(name);
  PADDLE_ENFORCE(t->initialized(),
                 phi::errors::InvalidArgument(
                     "Input '%s' (slot %s) of operator %s holds no data: run the op that "
                     "produces it first.",
                     name.c_str(), slot.c_str(), op.DebugString().c_str()));
  return *t;
}

bool ExecutionContext::HasInput(const std::string& slot) const {
  if (!op_.HasInput(slot)) return false;
  const phi::DenseTensor* t = scope_->FindVar(op_.Input(slot)[0]);
  return t != nullptr && t->initialized();
}

const std::string& ExecutionContext::InputName(const std::string& slot) const {
  return OneName(op_, op_.Input(slot), slot);
}
const std::string& ExecutionContext::OutputName(const std::string& slot) const {
  return OneName(op_, op_.Output(slot), slot);
}

const phi::DenseTensor& ExecutionContext::Input(const std::string& slot) const {
  return CheckedInput(op_, *scope_, slot, InputName(slot));
}

std::vector<const phi::DenseTensor*> ExecutionContext::MultiInput(const std::string& slot) const {
  std::vector<const phi::DenseTensor*> out;
  for (const auto& name : op_.Input(slot)) out.push_back(&CheckedInput(op_, *scope_, slot, name));
  return out;
}

phi::DenseTensor* ExecutionContext::Output(const std::string& slot) const {
  return scope_->Var(OutputName(slot));
}

std::vector<phi::DenseTensor*> ExecutionContext::MultiOutput(const std::string& slot) const {
  std::vector<phi::DenseTensor*> out;
  for (const auto& name : op_.Output(slot)) out.push_back(scope_->Var(name));
  return out;
}

}  // namespace framework
}  // namespace paddle_like
