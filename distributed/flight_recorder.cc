#include "distributed/flight_recorder.h"

#include "distributed/op_signature.h"

namespace paddle_like {
namespace distributed {

void FlightRecorder::Record(const OpDesc& desc, std::shared_ptr<TaskState> state) {
  if (capacity_ == 0) return;
  std::lock_guard<std::mutex> lk(mu_);
  if (ring_.size() < capacity_) {
    ring_.push_back(Entry{desc, std::move(state)});
  } else {
    // Assigned in place (every op comes here): the name reuses its string's storage.
    Entry& e = ring_[next_];
    e.desc = desc;
    e.state = std::move(state);
  }
  if (++next_ == capacity_) next_ = 0;
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

std::vector<FlightRecorder::Entry> FlightRecorder::Snapshot() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<Entry> out;
  size_t n = ring_.size();
  size_t start = n < capacity_ ? 0 : next_;
  for (size_t i = 0; i < n; ++i) out.push_back(ring_[(start + i) % n]);
  return out;
}

std::string FlightRecorder::DumpRecords() const {
  auto now = std::chrono::steady_clock::now();
  std::string out;
  for (const Entry& e : Snapshot()) {
    const OpDesc& d = e.desc;
    auto age = std::chrono::duration_cast<std::chrono::microseconds>(now - e.state->issued_at);
    out += "seq=" + std::to_string(d.seq) + " op=" + CommTypeToString(d.type) +
           " dtype=" + phi::DataTypeToString(d.dtype) + " in=" + std::to_string(d.numel_in) +
           " out=" + std::to_string(d.numel_out) + " peer=" + std::to_string(d.peer) +
           " red=" + std::to_string(d.reduce_op) + " tag=" + std::to_string(d.tag) +
           " p2p_seq=" + std::to_string(d.p2p_seq) + " sig=" + OpSignature::Of(d).Token() +
           " state=" + TaskStatusName(e.state->status.load()) +
           " age_us=" + std::to_string(age.count()) +
           " done_us=" + std::to_string(e.state->finished_us.load()) + " name=" + d.name + "\n";
  }
  return out;
}

}  // namespace distributed
}  // namespace paddle_like
