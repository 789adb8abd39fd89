#include "distributed/flight_recorder.h"

namespace paddle_like {
namespace distributed {

void FlightRecorder::Record(const OpDesc& desc, std::shared_ptr<TaskState> state) {
  if (capacity_ == 0) return;
  std::lock_guard<std::mutex> lk(mu_);
  Entry e{desc, std::move(state)};
  if (ring_.size() < capacity_) {
    ring_.push_back(std::move(e));
  } else {
    ring_[next_] = std::move(e);
  }
  next_ = (next_ + 1) % capacity_;
}

std::string FlightRecorder::Dump() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::string out;
  size_t n = ring_.size();
  size_t start = n < capacity_ ? 0 : next_;
  for (size_t i = 0; i < n; ++i) {
    const Entry& e = ring_[(start + i) % n];
    TaskStatus s = e.state->status.load();
    out += "  " + e.desc.ToString() + " " + TaskStatusName(s);
    int64_t us = e.state->finished_us.load();
    if (us > 0) out += " in " + std::to_string(us) + " us";
    out += "\n";
  }
  return out;
}

}  // namespace distributed
}  // namespace paddle_like
