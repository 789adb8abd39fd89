// Tensor dimensions.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

namespace phi {

class DDim {
 public:
  DDim() = default;
  DDim(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit DDim(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  int size() const { return static_cast<int>(dims_.size()); }
  int64_t operator[](int i) const { return dims_.at(i); }
  int64_t& operator[](int i) { return dims_.at(i); }
  const std::vector<int64_t>& Get() const { return dims_; }
  // Product of all dims; 1 for a 0-d (scalar) shape.
  int64_t numel() const;
  std::string to_str() const;

  bool operator==(const DDim& o) const { return dims_ == o.dims_; }
  bool operator!=(const DDim& o) const { return dims_ != o.dims_; }

 private:
  std::vector<int64_t> dims_;
};

inline DDim make_ddim(std::vector<int64_t> dims) { return DDim(std::move(dims)); }
std::ostream& operator<<(std::ostream& os, const DDim& d);

}  // namespace phi
