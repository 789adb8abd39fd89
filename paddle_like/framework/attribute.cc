#include "paddle_like/framework/attribute.h"

namespace paddle_like {
namespace framework {

namespace {
// Indexed like Attribute's alternatives.
constexpr const char* kNames[] = {
    "int",           "int64",          "float",        "double",
    "bool",          "string",         "vector<int>",  "vector<int64>",
    "vector<float>", "vector<double>", "vector<bool>", "vector<string>"};
static_assert(sizeof(kNames) / sizeof(kNames[0]) == std::variant_size_v<Attribute>,
              "a name for every attribute type");
}  // namespace

const char* AttrTypeName(const Attribute& attr) { return kNames[attr.index()]; }

template <typename T>
const char* AttrTypeNameOf() {
  return AttrTypeName(Attribute(T{}));
}
template const char* AttrTypeNameOf<int>();
template const char* AttrTypeNameOf<int64_t>();
template const char* AttrTypeNameOf<float>();
template const char* AttrTypeNameOf<double>();
template const char* AttrTypeNameOf<bool>();
template const char* AttrTypeNameOf<std::string>();
template const char* AttrTypeNameOf<std::vector<int>>();
template const char* AttrTypeNameOf<std::vector<int64_t>>();
template const char* AttrTypeNameOf<std::vector<float>>();
template const char* AttrTypeNameOf<std::vector<double>>();
template const char* AttrTypeNameOf<std::vector<bool>>();
template const char* AttrTypeNameOf<std::vector<std::string>>();

}  // namespace framework
}  // namespace paddle_like
