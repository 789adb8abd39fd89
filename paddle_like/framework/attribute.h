// Typed operator attributes (Paddle's AttributeMap): one variant of the types an op may carry.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace paddle_like {
namespace framework {

using Attribute = std::variant<int, int64_t, float, double, bool, std::string, std::vector<int>,
                               std::vector<int64_t>, std::vector<float>, std::vector<double>,
                               std::vector<bool>, std::vector<std::string>>;
using AttributeMap = std::map<std::string, Attribute>;

// "int", "int64", "float", ..., "vector<string>": the name of the type an attribute holds.
const char* AttrTypeName(const Attribute& attr);
template <typename T>
const char* AttrTypeNameOf();

}  // namespace framework
}  // namespace paddle_like
