#include "paddle_like/framework/pending_comm.h"

#include <algorithm>
#include <exception>

namespace paddle_like {
namespace framework {

void PendingComm::Add(int ring_id, distributed::ProcessGroup::TaskPtr task,
                      std::vector<std::string> vars) {
  ops_.push_back(Op{ring_id, std::move(task), std::move(vars)});
}

template <typename Pred>
void PendingComm::WaitWhere(Pred pick) {
  std::vector<Op> chosen;
  std::vector<Op> rest;
  for (auto& op : ops_) (pick(op) ? chosen : rest).push_back(std::move(op));
  // Forget them before waiting: an op whose wait raised must not be waited for again. All of
  // them are waited for, then the first error is rethrown.
  ops_.swap(rest);
  std::exception_ptr first;
  for (auto& op : chosen) {
    try {
      op.task->Wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

void PendingComm::WaitForVars(const std::vector<std::string>& vars) {
  if (ops_.empty()) return;
  WaitWhere([&](const Op& op) {
    for (const auto& v : op.vars) {
      if (std::find(vars.begin(), vars.end(), v) != vars.end()) return true;
    }
    return false;
  });
}

void PendingComm::WaitRing(int ring_id) {
  WaitWhere([&](const Op& op) { return op.ring_id == ring_id; });
}

void PendingComm::WaitAll() {
  WaitWhere([](const Op&) { return true; });
}

}  // namespace framework
}  // namespace paddle_like
