// OpObserver: the one hook through which the engine's Run shows a group's ops to what watches
// them. The flight recorder (and through it the watchdog and fr_trace), the comm timeline and
// the store fingerprint check subscribe here instead of each being wired into Run.
//
// Run calls a group's observers in the order they were added: BeforeIssue before the op takes
// a sequence number, OnIssue once it has one and a task. When the op starts and ends is in the
// TaskState an observer is handed (status and times, written by the stream that runs it),
// which it keeps and reads when it reports: the engine makes no call per start or end, so an
// observer costs nothing on the stream's thread.
#pragma once

#include <memory>
#include <string>

#include "distributed/stream_task.h"

namespace paddle_like {
namespace distributed {

class OpObserver {
 public:
  virtual ~OpObserver() = default;
  // Whether BeforeIssue does anything (Run skips the call, and the lock it needs, otherwise).
  virtual bool ChecksBeforeIssue() const { return false; }
  // Collectives only, outside coalesced groups, before the op is issued. A raise here is a
  // cross-rank check's verdict, which every rank of the group raises alike: no failure notice
  // follows it.
  virtual void BeforeIssue(const OpDesc& desc, const std::string& group_desc) {}
  // Every op, once it has its sequence numbers and its task's state (which holds its desc).
  virtual void OnIssue(const std::shared_ptr<TaskState>& state) {}
};

}  // namespace distributed
}  // namespace paddle_like
