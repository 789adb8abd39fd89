#include "paddle_like/framework/kernel_registry.h"

#include <algorithm>

#include "phi/core/errors.h"

namespace paddle_like {
namespace framework {

namespace {
const char* PlaceName(phi::AllocationType t) {
  return t == phi::AllocationType::CPU ? "CPU" : "GPU";
}
const char* DTypeName(phi::DataType d) {
  return d == phi::DataType::UNDEFINED ? "any dtype" : phi::DataTypeToString(d);
}
}  // namespace

std::string KernelKey::DebugString() const {
  return "(" + op_type + ", " + PlaceName(place) + ", " + DTypeName(dtype) + ")";
}

KernelRegistry& KernelRegistry::Instance() {
  // Built once, before any user registrar can see it half-filled; never destroyed (static
  // registrars and executors may run during static destruction).
  static KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();
    RegisterBuiltinOperators(r);
    return r;
  }();
  return *registry;
}

void KernelRegistry::Register(const std::string& op_type, phi::AllocationType place,
                              phi::DataType dtype, KernelFn fn) {
  std::lock_guard<std::mutex> lk(mu_);
  auto& slot = ops_[op_type].kernels[{place, dtype}];
  PADDLE_ENFORCE(slot == nullptr, phi::errors::PreconditionNotMet(
                                      "Kernel %s is registered twice.",
                                      KernelKey{op_type, place, dtype}.DebugString().c_str()));
  slot = fn;
}

void KernelRegistry::SetKeyInput(const std::string& op_type, const std::string& slot) {
  std::lock_guard<std::mutex> lk(mu_);
  ops_[op_type].key_input = slot;
}

std::string KernelRegistry::KeyInput(const std::string& op_type) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = ops_.find(op_type);
  return it == ops_.end() ? "X" : it->second.key_input;
}

KernelFn KernelRegistry::Find(const KernelKey& key) const {
  std::unique_lock<std::mutex> lk(mu_);
  auto op = ops_.find(key.op_type);
  if (op != ops_.end()) {
    const auto& kernels = op->second.kernels;
    auto it = kernels.find({key.place, key.dtype});
    if (it != kernels.end()) return it->second;
    it = kernels.find({key.place, phi::DataType::UNDEFINED});
    if (it != kernels.end()) return it->second;
    std::string have;
    for (const auto& kv : kernels) {
      have += (have.empty() ? "" : ", ") + std::string(PlaceName(kv.first.first)) + "/" +
              DTypeName(kv.first.second);
    }
    lk.unlock();
    PADDLE_THROW(phi::errors::NotFound(
        "Operator %s has no kernel for %s %s; it has kernels for: %s.", key.op_type.c_str(),
        PlaceName(key.place), DTypeName(key.dtype), have.c_str()));
  }
  lk.unlock();
  std::string names;
  for (const auto& n : OpTypes()) names += (names.empty() ? "" : ", ") + n;
  PADDLE_THROW(phi::errors::NotFound("There is no operator '%s'. Registered operators: %s.",
                                     key.op_type.c_str(), names.c_str()));
}

bool KernelRegistry::Has(const std::string& op_type) const {
  std::lock_guard<std::mutex> lk(mu_);
  return ops_.count(op_type) > 0;
}

std::vector<std::string> KernelRegistry::OpTypes() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<std::string> names;
  for (const auto& kv : ops_) {
    if (!kv.second.kernels.empty()) names.push_back(kv.first);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace framework
}  // namespace paddle_like
