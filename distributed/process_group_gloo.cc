#include "distributed/process_group_gloo.h"

#include "phi/core/distributed/gloo_comm_context.h"
#include "phi/core/errors.h"
#include "phi/core/flags.h"

namespace paddle_like {
namespace distributed {

ProcessGroupGloo::ProcessGroupGloo(std::shared_ptr<phi::distributed::Store> store, int rank,
                                   int size, int gid, std::chrono::milliseconds timeout,
                                   const ProcessGroupGlooOptions* options, std::string group_desc)
    : ProcessGroupCpu(std::move(store), rank, size, gid,
                      options && options->timeout > std::chrono::milliseconds::zero()
                          ? options->timeout
                          : timeout,
                      "gloo", std::move(group_desc)) {
  if (options != nullptr) {
    PADDLE_ENFORCE(options->interface.empty() || options->hostname.empty(),
                   phi::errors::InvalidArgument(
                       "%s: ProcessGroupGlooOptions sets both interface '%s' and hostname "
                       "'%s'; give one of them.",
                       Describe().c_str(), options->interface.c_str(),
                       options->hostname.c_str()));
    interface_ = options->interface;
    hostname_ = options->hostname;
  }
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
  options.iface = interface_;
  options.hostname = hostname_;
  options.group_desc = group_desc();
  return phi::distributed::CreateGlooCommContext(store(), GetGid(), GetRank(), GetSize(),
                                                 options);
}

}  // namespace distributed
}  // namespace paddle_like
