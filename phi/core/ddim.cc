#include "phi/core/ddim.h"

namespace phi {

int64_t DDim::numel() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

std::string DDim::to_str() const {
  std::string s = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[i]);
  }
  return s + "]";
}

std::ostream& operator<<(std::ostream& os, const DDim& d) { return os << d.to_str(); }

}  // namespace phi
