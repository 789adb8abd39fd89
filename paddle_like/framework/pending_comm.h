// The comm ops a program issued with use_calc_stream=false and nobody has waited for yet.
//
// As in Paddle's executor, compute that does not read or write their tensors runs on while
// they are in flight; a later op that touches one of their variables first waits for them
// (the consumer's event), and c_sync_comm_stream waits for every pending op of its ring.
#pragma once

#include <string>
#include <vector>

#include "distributed/process_group.h"

namespace paddle_like {
namespace framework {

class PendingComm {
 public:
  PendingComm() = default;
  PendingComm(const PendingComm&) = delete;
  PendingComm& operator=(const PendingComm&) = delete;

  // `vars`: the variables the op reads or writes.
  void Add(int ring_id, distributed::ProcessGroup::TaskPtr task, std::vector<std::string> vars);
  bool empty() const { return ops_.empty(); }
  size_t size() const { return ops_.size(); }
  // Orders the calc stream after (Task::Wait: on CPU the host waits) every pending op that
  // touches one of `vars`, and forgets those ops. Rethrows an op's error.
  void WaitForVars(const std::vector<std::string>& vars);
  void WaitRing(int ring_id);
  void WaitAll();

 private:
  struct Op {
    int ring_id;
    distributed::ProcessGroup::TaskPtr task;
    std::vector<std::string> vars;
  };
  // Waits for the ops `pick` selects, oldest first, and erases them (also on error).
  template <typename Pred>
  void WaitWhere(Pred pick);
  std::vector<Op> ops_;  // issue order
};

}  // namespace framework
}  // namespace paddle_like
