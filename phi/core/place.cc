#include "phi/core/place.h"

namespace phi {

std::string Place::DebugString() const {
  return is_cpu() ? std::string("Place(cpu)")
                  : "Place(gpu:" + std::to_string(device_) + ")";
}

std::ostream& operator<<(std::ostream& os, const Place& p) { return os << p.DebugString(); }

}  // namespace phi
