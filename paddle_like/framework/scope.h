// Scope: variable name -> DenseTensor, the storage a program's ops read and write.
// Tensors live at stable addresses until erased (kernels hold pointers to them).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "phi/core/dense_tensor.h"

namespace paddle_like {
namespace framework {

class Scope {
 public:
  Scope() = default;
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  // The variable, created (an uninitialized tensor) when absent.
  phi::DenseTensor* Var(const std::string& name);
  // The variable or nullptr.
  phi::DenseTensor* FindVar(const std::string& name) const;
  // The variable; NotFound naming it (and the variables that exist) when absent.
  phi::DenseTensor* GetVar(const std::string& name) const;
  bool HasVar(const std::string& name) const { return FindVar(name) != nullptr; }
  void EraseVar(const std::string& name);
  std::vector<std::string> VarNames() const;  // sorted

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<phi::DenseTensor>> vars_;
};

}  // namespace framework
}  // namespace paddle_like
