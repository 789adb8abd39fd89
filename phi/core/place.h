// Where memory and work live: the host or one GPU.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

namespace phi {

enum class AllocationType : int8_t { CPU = 0, GPU = 1 };

class Place {
 public:
  Place() = default;
  Place(AllocationType type, int device) : type_(type), device_(device) {}

  AllocationType GetType() const { return type_; }
  int GetDeviceId() const { return device_; }
  bool is_cpu() const { return type_ == AllocationType::CPU; }
  bool is_gpu() const { return type_ == AllocationType::GPU; }
  std::string DebugString() const;

  bool operator==(const Place& o) const { return type_ == o.type_ && device_ == o.device_; }
  bool operator!=(const Place& o) const { return !(*this == o); }
  bool operator<(const Place& o) const {
    return type_ != o.type_ ? type_ < o.type_ : device_ < o.device_;
  }

 private:
  AllocationType type_ = AllocationType::CPU;
  int device_ = 0;
};

inline Place CPUPlace() { return Place(AllocationType::CPU, 0); }
inline Place GPUPlace(int device = 0) { return Place(AllocationType::GPU, device); }

std::ostream& operator<<(std::ostream& os, const Place& p);

}  // namespace phi

template <>
struct std::hash<phi::Place> {
  size_t operator()(const phi::Place& p) const {
    return (static_cast<size_t>(p.GetType()) << 16) ^ static_cast<size_t>(p.GetDeviceId());
  }
};
