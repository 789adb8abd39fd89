// The flight recorder: a ring of the last ops of one group (sequence number, op, sizes,
// dtype, state, timing), dumped into timeout and failure reports.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/op_observer.h"
#include "distributed/stream_task.h"

namespace paddle_like {
namespace distributed {

class FlightRecorder : public OpObserver {
 public:
  explicit FlightRecorder(size_t capacity) : capacity_(capacity) {}
  void Record(std::shared_ptr<TaskState> state);
  void OnIssue(const std::shared_ptr<TaskState>& state) override { Record(state); }
  // Oldest first, one op per line.
  std::string Dump() const;

  // An op: what it is (desc), how far it got and when.
  using Entry = std::shared_ptr<TaskState>;
  // The recorded ops, oldest first (the watchdog's view).
  std::vector<Entry> Snapshot() const;
  // The recorded ops as the dump files tools/fr_trace reads: one op per line,
  // "seq=.. op=.. dtype=.. in=.. out=.. peer=.. red=.. tag=.. p2p_seq=.. sig=.. state=..
  // age_us=.. done_us=.. name=..";
  // seq is the collective number, p2p_seq the point-to-point one (0 for a collective), sig
  // what the ranks must agree on (OpSignature::Token, op_signature.h).
  std::string DumpRecords() const;

 private:
  size_t capacity_;
  mutable std::mutex mu_;
  std::vector<Entry> ring_;
  size_t next_ = 0;
};

}  // namespace distributed
}  // namespace paddle_like
