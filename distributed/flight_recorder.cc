#include "distributed/flight_recorder.h"

#include <utility>

#include "distributed/op_signature.h"

namespace paddle_like {
namespace distributed {

void FlightRecorder::Record(std::shared_ptr<TaskState> state) {
  if (capacity_ == 0) return;
  Entry dropped;  // freed after the lock
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (ring_.size() < capacity_) {
      ring_.push_back(std::move(state));
    } else {
      dropped = std::exchange(ring_[next_], std::move(state));
    }
    if (++next_ == capacity_) next_ = 0;
  }
}

std::string FlightRecorder::Dump() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::string out;
  size_t n = ring_.size();
  size_t start = n < capacity_ ? 0 : next_;
  for (size_t i = 0; i < n; ++i) {
    const Entry& e = ring_[(start + i) % n];
    out += "  " + e->desc.ToString() + " " + TaskStatusName(e->status.load());
    const std::string took = e->TookText();
    if (!took.empty()) out += " " + took;
    out += "\n";
  }
  return out;
}

std::vector<FlightRecorder::Entry> FlightRecorder::Snapshot() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<Entry> out;
  size_t n = ring_.size();
  size_t start = n < capacity_ ? 0 : next_;
  for (size_t i = 0; i < n; ++i) out.push_back(ring_[(start + i) % n]);
  return out;
}

std::string FlightRecorder::DumpRecords() const {
  std::string out;
  for (const Entry& e : Snapshot()) {
    const OpDesc& d = e->desc;
    out += "seq=" + std::to_string(d.seq) + " op=" + CommTypeToString(d.type) +
           " dtype=" + phi::DataTypeToString(d.dtype) + " in=" + std::to_string(d.numel_in) +
           " out=" + std::to_string(d.numel_out) + " peer=" + std::to_string(d.peer) +
           " red=" + std::to_string(d.reduce_op) + " tag=" + std::to_string(d.tag) +
           " p2p_seq=" + std::to_string(d.p2p_seq) + " sig=" + OpSignature::Of(d).Token() +
           " state=" + TaskStatusName(e->status.load()) +
           " age_us=" + std::to_string(e->Age().count()) +
           " done_us=" + std::to_string(e->finished_us.load()) + " name=" + d.name + "\n";
  }
  return out;
}

}  // namespace distributed
}  // namespace paddle_like
