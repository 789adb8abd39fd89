#include "distributed/process_group_gloo.h"

#include "phi/core/distributed/gloo_comm_context.h"
#include "phi/core/flags.h"

namespace paddle_like {
namespace distributed {

ProcessGroupGloo::ProcessGroupGloo(std::shared_ptr<phi::distributed::Store> store, int rank,
                                   int size, int gid, std::chrono::milliseconds timeout)
    : ProcessGroupCpu(std::move(store), rank, size, gid, timeout, "gloo") {
  // Eager: every pair connects now, so creation waits (at most the group's timeout) for all
  // ranks and names the missing ones. Otherwise pairs connect when an op first needs them.
  if (FLAGS_eager_communication_connection) {
    CreateCommContextNow([](phi::distributed::CommContext* comm) { comm->ConnectAll(); });
  }
}

std::shared_ptr<ProcessGroupGloo> ProcessGroupGloo::CreateProcessGroupGloo(
    std::shared_ptr<phi::distributed::Store> store, int rank, int size, int gid,
    std::chrono::milliseconds timeout) {
  auto pg = std::make_shared<ProcessGroupGloo>(std::move(store), rank, size, gid, timeout);
  ProcessGroupIdMap::GetInstance().Insert(gid, pg);
  return pg;
}

std::unique_ptr<phi::distributed::CommContext> ProcessGroupGloo::CreateCommContext() {
  phi::distributed::GlooOptions options;
  options.timeout = timeout();
  return phi::distributed::CreateGlooCommContext(store(), GetGid(), GetRank(), GetSize(),
                                                 options);
}

}  // namespace distributed
}  // namespace paddle_like
