// The comm timeline: with FLAGS_comm_trace_dir set, every comm task of every group (its issue
// on the calling thread, its start and end on the comm stream, bytes, seq, group, and the
// record_comm name) and every TraceSpan (compute: forward, backward, ...) is kept, and
// written at exit (or by FlushCommTrace) as a Chrome/Perfetto JSON trace
// <dir>/trace_<pid>.json, one event per line. tools/merge_traces merges the ranks' files into
// one timeline (and a PNG).
#pragma once

#include <chrono>
#include <memory>
#include <string>

namespace paddle_like {
namespace distributed {

class OpObserver;

// Whether FLAGS_comm_trace_dir is set (checked per op: the cost when off is this call).
bool CommTraceEnabled();
// A group's observer (op_observer.h): keeps each op and its state for the trace while the
// flag is set (up to FLAGS_comm_trace_max_events).
std::shared_ptr<OpObserver> MakeCommTraceObserver(int gid, int rank);
// Writes what was recorded so far (also done at exit). Returns the file, "" when off.
std::string FlushCommTrace();

// A span of compute on the calling thread ("forward", "backward"), for the timeline.
class TraceSpan {
 public:
  explicit TraceSpan(const char* name);
  ~TraceSpan();
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  const char* name_;
  bool on_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace distributed
}  // namespace paddle_like
