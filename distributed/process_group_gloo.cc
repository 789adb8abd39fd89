#include "distributed/process_group_gloo.h"

#include "phi/core/distributed/comm_context_manager.h"
#include "phi/core/distributed/gloo_comm_context.h"
#include "phi/core/errors.h"
#include "phi/core/flags.h"

namespace paddle_like {
namespace distributed {

using phi::distributed::CommContextManager;

ProcessGroupGloo::ProcessGroupGloo(std::shared_ptr<phi::distributed::Store> store, int rank,
                                   int size, int gid, std::chrono::milliseconds timeout)
    : ProcessGroupWithStream(std::move(store), rank, size, gid, timeout) {
  // Eager: every pair connects now, so creation waits (at most the group's timeout) for all
  // ranks and names the missing ones. Otherwise pairs connect when an op first needs them.
  if (FLAGS_eager_communication_connection) {
    try {
      GetOrCreateCommContext(phi::CPUPlace())->ConnectAll();
    } catch (...) {
      // No destructor runs for a half-built group: drop its communicator here, or a later
      // group with this gid would find it.
      CommContextManager::Instance().Erase(CommContextManager::KeyOf("gloo", GetGid()), this);
      throw;
    }
  }
}

ProcessGroupGloo::~ProcessGroupGloo() {
  // Jobs still queued use the communicator: let them finish before it goes.
  ShutdownStreams();
  CommContextManager::Instance().Erase(CommContextManager::KeyOf("gloo", GetGid()), this);
}

std::shared_ptr<ProcessGroupGloo> ProcessGroupGloo::CreateProcessGroupGloo(
    std::shared_ptr<phi::distributed::Store> store, int rank, int size, int gid,
    std::chrono::milliseconds timeout) {
  auto pg = std::make_shared<ProcessGroupGloo>(std::move(store), rank, size, gid, timeout);
  ProcessGroupIdMap::GetInstance().Insert(gid, pg);
  return pg;
}

phi::distributed::CommContext* ProcessGroupGloo::GetOrCreateCommContext(const phi::Place&) {
  return CommContextManager::Instance().GetOrCreate(
      CommContextManager::KeyOf("gloo", GetGid()), this, GetRank(), GetSize(), [this] {
        phi::distributed::GlooOptions options;
        options.timeout = timeout();
        return phi::distributed::CreateGlooCommContext(store(), GetGid(), GetRank(), GetSize(),
                                                       options);
      });
}

void ProcessGroupGloo::CheckPlace(const phi::Place& place) const {
  PADDLE_ENFORCE(place.is_cpu(),
                 phi::errors::InvalidArgument(
                     "ProcessGroupGloo runs on CPU tensors, but the tensor is on %s.",
                     place.DebugString().c_str()));
}

}  // namespace distributed
}  // namespace paddle_like
