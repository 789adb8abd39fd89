#include "paddle_like/framework/scope.h"

#include "phi/core/errors.h"

namespace paddle_like {
namespace framework {

phi::DenseTensor* Scope::Var(const std::string& name) {
  std::lock_guard<std::mutex> lk(mu_);
  auto& slot = vars_[name];
  if (!slot) slot = std::make_unique<phi::DenseTensor>();
  return slot.get();
}

phi::DenseTensor* Scope::FindVar(const std::string& name) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = vars_.find(name);
  return it == vars_.end() ? nullptr : it->second.get();
}

phi::DenseTensor* Scope::GetVar(const std::string& name) const {
  phi::DenseTensor* t = FindVar(name);
  if (t == nullptr) {
    std::string names;
    for (const auto& n : VarNames()) names += (names.empty() ? "" : ", ") + n;
    PADDLE_THROW(phi::errors::NotFound("Variable '%s' is not in the scope (it holds: %s).",
                                       name.c_str(), names.empty() ? "nothing" : names.c_str()));
  }
  return t;
}

void Scope::EraseVar(const std::string& name) {
  std::lock_guard<std::mutex> lk(mu_);
  vars_.erase(name);
}

std::vector<std::string> Scope::VarNames() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<std::string> names;
  names.reserve(vars_.size());
  for (const auto& kv : vars_) names.push_back(kv.first);
  return names;
}

}  // namespace framework
}  // namespace paddle_like
