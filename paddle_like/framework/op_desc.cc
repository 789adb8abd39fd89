#include "paddle_like/framework/op_desc.h"

#include <sstream>

#include "phi/core/errors.h"

namespace paddle_like {
namespace framework {

OpDesc& OpDesc::SetInput(const std::string& slot, std::vector<std::string> vars) {
  inputs_[slot] = std::move(vars);
  return *this;
}
OpDesc& OpDesc::SetOutput(const std::string& slot, std::vector<std::string> vars) {
  outputs_[slot] = std::move(vars);
  return *this;
}
OpDesc& OpDesc::SetAttr(const std::string& name, Attribute value) {
  attrs_[name] = std::move(value);
  return *this;
}

bool OpDesc::HasInput(const std::string& slot) const {
  auto it = inputs_.find(slot);
  return it != inputs_.end() && !it->second.empty();
}
bool OpDesc::HasOutput(const std::string& slot) const {
  auto it = outputs_.find(slot);
  return it != outputs_.end() && !it->second.empty();
}

namespace {
std::string SlotNames(const VariableNameMap& m) {
  std::string s;
  for (const auto& kv : m) s += (s.empty() ? "" : ", ") + kv.first;
  return s.empty() ? "none" : s;
}
const std::vector<std::string>& FindSlot(const OpDesc& op, const VariableNameMap& m,
                                         const std::string& slot, const char* kind) {
  auto it = m.find(slot);
  PADDLE_ENFORCE(
      it != m.end(),
      phi::errors::NotFound("Operator %s has no %s slot '%s' (it has: %s).",
                            op.DebugString().c_str(), kind, slot.c_str(), SlotNames(m).c_str()));
  return it->second;
}
void AppendSlots(std::ostringstream& os, const VariableNameMap& m) {
  bool first = true;
  for (const auto& kv : m) {
    os << (first ? "" : ", ") << kv.first << "=[";
    for (size_t i = 0; i < kv.second.size(); ++i) os << (i ? "," : "") << kv.second[i];
    os << "]";
    first = false;
  }
}
}  // namespace

const std::vector<std::string>& OpDesc::Input(const std::string& slot) const {
  return FindSlot(*this, inputs_, slot, "input");
}
const std::vector<std::string>& OpDesc::Output(const std::string& slot) const {
  return FindSlot(*this, outputs_, slot, "output");
}

std::string OpDesc::DebugString() const {
  std::ostringstream os;
  os << type_ << "(";
  AppendSlots(os, inputs_);
  os << " -> ";
  AppendSlots(os, outputs_);
  os << ")";
  return os.str();
}

namespace detail {

template <typename T>
bool ConvertAttr(const Attribute& a, T* out) {
  if (const T* v = std::get_if<T>(&a)) {
    *out = *v;
    return true;
  }
  if constexpr (std::is_same_v<T, int64_t>) {
    if (const int* v = std::get_if<int>(&a)) return (*out = *v), true;
  } else if constexpr (std::is_same_v<T, double>) {
    if (const float* v = std::get_if<float>(&a)) return (*out = *v), true;
  } else if constexpr (std::is_same_v<T, float>) {
    if (const double* v = std::get_if<double>(&a)) return (*out = static_cast<float>(*v)), true;
  } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
    if (const auto* v = std::get_if<std::vector<int>>(&a)) {
      out->assign(v->begin(), v->end());
      return true;
    }
  }
  return false;
}
template bool ConvertAttr<int>(const Attribute&, int*);
template bool ConvertAttr<int64_t>(const Attribute&, int64_t*);
template bool ConvertAttr<float>(const Attribute&, float*);
template bool ConvertAttr<double>(const Attribute&, double*);
template bool ConvertAttr<bool>(const Attribute&, bool*);
template bool ConvertAttr<std::string>(const Attribute&, std::string*);
template bool ConvertAttr<std::vector<int>>(const Attribute&, std::vector<int>*);
template bool ConvertAttr<std::vector<int64_t>>(const Attribute&, std::vector<int64_t>*);
template bool ConvertAttr<std::vector<float>>(const Attribute&, std::vector<float>*);
template bool ConvertAttr<std::vector<double>>(const Attribute&, std::vector<double>*);
template bool ConvertAttr<std::vector<bool>>(const Attribute&, std::vector<bool>*);
template bool ConvertAttr<std::vector<std::string>>(const Attribute&, std::vector<std::string>*);

void ThrowAttrMissing(const OpDesc& op, const std::string& name) {
  std::string have;
  for (const auto& kv : op.Attrs()) have += (have.empty() ? "" : ", ") + kv.first;
  PADDLE_THROW(phi::errors::NotFound("Operator %s needs attribute '%s'; it has: %s.",
                                     op.DebugString().c_str(), name.c_str(),
                                     have.empty() ? "none" : have.c_str()));
}

void ThrowAttrType(const OpDesc& op, const std::string& name, const char* want,
                   const Attribute& held) {
  PADDLE_THROW(phi::errors::InvalidArgument(
      "Attribute '%s' of operator %s must be %s, but it holds %s.", name.c_str(),
      op.DebugString().c_str(), want, AttrTypeName(held)));
}

}  // namespace detail
}  // namespace framework
}  // namespace paddle_like
