// The kernel registry: (op type, place type, dtype) -> kernel.
//
// A kernel registered with dtype UNDEFINED serves every dtype of its op and place (ops that
// move bytes, or that check dtypes themselves); an exact dtype wins over it. Which tensor's
// dtype selects the kernel: the op's `dtype` attribute when it has one (recv_v2,
// fill_constant: a VarType number), otherwise the first tensor of the op's key input slot
// ("X" unless the op says otherwise, e.g. "Logits"), otherwise UNDEFINED.
//
// A user adds a kernel from any source file, without touching this one:
//
//   void MyOpKernel(const paddle_like::framework::ExecutionContext& ctx) { ... }
//   PD_REGISTER_OP_KERNEL(my_op, CPU, MyOpKernel, float, double);
//
// (In a static library an object file that nothing references is not linked: register
// there through KernelRegistry::Register from code that runs, or link it whole.)
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "paddle_like/framework/execution_context.h"
#include "phi/core/data_type.h"
#include "phi/core/place.h"

namespace paddle_like {
namespace framework {

using KernelFn = void (*)(const ExecutionContext& ctx);

struct KernelKey {
  std::string op_type;
  phi::AllocationType place = phi::AllocationType::CPU;
  phi::DataType dtype = phi::DataType::UNDEFINED;
  std::string DebugString() const;
};

class KernelRegistry {
 public:
  // Holds the built-in operators (registered on first use).
  static KernelRegistry& Instance();

  // PreconditionNotMet when (op, place, dtype) already has a kernel.
  void Register(const std::string& op_type, phi::AllocationType place, phi::DataType dtype,
                KernelFn fn);
  template <typename... Ts>
  void RegisterTypes(const std::string& op_type, phi::AllocationType place, KernelFn fn) {
    (Register(op_type, place, phi::CppTypeToDataType<Ts>::Type(), fn), ...);
  }
  // The input slot whose dtype selects the op's kernel (default "X").
  void SetKeyInput(const std::string& op_type, const std::string& slot);
  std::string KeyInput(const std::string& op_type) const;

  // NotFound naming the op when it has no kernel at all (and the ops that exist), or the
  // (place, dtype) pairs it has when it has none for this key.
  KernelFn Find(const KernelKey& key) const;
  bool Has(const std::string& op_type) const;
  std::vector<std::string> OpTypes() const;  // sorted

 private:
  KernelRegistry() = default;
  struct OpKernels {
    std::string key_input = "X";
    std::map<std::pair<phi::AllocationType, phi::DataType>, KernelFn> kernels;
  };
  mutable std::mutex mu_;
  std::unordered_map<std::string, OpKernels> ops_;
};

// Registers `fn` for every type of Ts at static-initialization time.
template <typename... Ts>
struct KernelRegistrar {
  KernelRegistrar(const char* op_type, phi::AllocationType place, KernelFn fn) {
    KernelRegistry::Instance().RegisterTypes<Ts...>(op_type, place, fn);
  }
};

// Adds the built-in operators (paddle_like/operators) to `registry`; called once by
// KernelRegistry::Instance().
void RegisterBuiltinOperators(KernelRegistry* registry);

}  // namespace framework
}  // namespace paddle_like

#define PD_REGISTER_OP_KERNEL(op_type, place, fn, ...)          \
  static ::paddle_like::framework::KernelRegistrar<__VA_ARGS__> \
      pd_op_kernel_registrar_##op_type##_##place(#op_type, ::phi::AllocationType::place, fn)
