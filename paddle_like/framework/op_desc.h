// OpDesc: one operator of a program (Paddle's OpDesc): its type, named inputs and outputs
// (slot -> variable names in a Scope) and typed attributes.
//
//   OpDesc op("c_allreduce_sum");
//   op.SetInput("X", {"h"}).SetOutput("Out", {"h"}).SetAttr("ring_id", 0);
//
// Attribute reads are typed: asking for an int64 of an attribute that holds a string raises
// InvalidArgument naming the op, the attribute, the type asked for and the type it holds.
// Only lossless widenings are implicit (int -> int64, float -> double, vector<int> ->
// vector<int64>), plus double -> float, since C++ literals are double.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "paddle_like/framework/attribute.h"

namespace paddle_like {
namespace framework {

using VariableNameMap = std::map<std::string, std::vector<std::string>>;

class OpDesc {
 public:
  OpDesc() = default;
  explicit OpDesc(std::string type) : type_(std::move(type)) {}

  const std::string& Type() const { return type_; }
  void SetType(std::string type) { type_ = std::move(type); }

  OpDesc& SetInput(const std::string& slot, std::vector<std::string> vars);
  OpDesc& SetOutput(const std::string& slot, std::vector<std::string> vars);
  OpDesc& SetAttr(const std::string& name, Attribute value);
  // String literals are strings, not bools. (An array reference, not `const char*`: a literal
  // 0 would convert to a null `const char*` before it converts to an Attribute.)
  template <size_t N>
  OpDesc& SetAttr(const std::string& name, const char (&value)[N]) {
    return SetAttr(name, Attribute(std::string(value)));
  }

  bool HasInput(const std::string& slot) const;
  bool HasOutput(const std::string& slot) const;
  bool HasAttr(const std::string& name) const { return attrs_.count(name) > 0; }
  // The variable names of a slot; NotFound when the op has no such slot.
  const std::vector<std::string>& Input(const std::string& slot) const;
  const std::vector<std::string>& Output(const std::string& slot) const;
  const VariableNameMap& Inputs() const { return inputs_; }
  const VariableNameMap& Outputs() const { return outputs_; }
  const AttributeMap& Attrs() const { return attrs_; }

  // The attribute as T; NotFound when absent, InvalidArgument when of another type.
  template <typename T>
  T GetAttr(const std::string& name) const;
  // The attribute as T, or `fallback` when the op does not set it (Paddle's default).
  template <typename T>
  T GetAttrOr(const std::string& name, T fallback) const {
    return HasAttr(name) ? GetAttr<T>(name) : fallback;
  }

  // "c_allreduce_sum(X=[h] -> Out=[h])": how errors name the op.
  std::string DebugString() const;

 private:
  std::string type_;
  VariableNameMap inputs_;
  VariableNameMap outputs_;
  AttributeMap attrs_;
};

// A program: ops run in order.
struct ProgramDesc {
  std::vector<OpDesc> ops;
  OpDesc& AppendOp(std::string type) {
    ops.emplace_back(std::move(type));
    return ops.back();
  }
};

namespace detail {
// Converts when the held type is T or widens to it; false otherwise.
template <typename T>
bool ConvertAttr(const Attribute& a, T* out);
[[noreturn]] void ThrowAttrMissing(const OpDesc& op, const std::string& name);
[[noreturn]] void ThrowAttrType(const OpDesc& op, const std::string& name, const char* want,
                                const Attribute& held);
}  // namespace detail

template <typename T>
T OpDesc::GetAttr(const std::string& name) const {
  auto it = attrs_.find(name);
  if (it == attrs_.end()) detail::ThrowAttrMissing(*this, name);
  T value{};
  if (!detail::ConvertAttr<T>(it->second, &value)) {
    detail::ThrowAttrType(*this, name, AttrTypeNameOf<T>(), it->second);
  }
  return value;
}

}  // namespace framework
}  // namespace paddle_like
