#include "distributed/process_group_nccl.h"

#include <cstdlib>
#include <string>

#include "phi/core/device_info.h"
#include "phi/core/distributed/comm_context_manager.h"
#include "phi/core/errors.h"
#include "phi/core/flags.h"

namespace paddle_like {
namespace distributed {

using phi::distributed::CommContextManager;
using phi::distributed::NCCLCommContext;

int ProcessGroupNCCL::DefaultDevice(int rank) {
  const int count = phi::GetGPUDeviceCount();
  if (count == 0) {
    PADDLE_THROW(phi::errors::Unavailable("ProcessGroupNCCL needs a CUDA device: %s.",
                                          phi::GPUUnavailableReason().c_str()));
  }
  if (const char* local = std::getenv("LOCAL_RANK")) {
    char* end = nullptr;
    long v = std::strtol(local, &end, 10);
    PADDLE_ENFORCE(end != local && *end == '\0' && v >= 0,
                   phi::errors::InvalidArgument("LOCAL_RANK='%s' is not a rank.", local));
    return static_cast<int>(v % count);
  }
  return rank % count;
}

ProcessGroupNCCL::ProcessGroupNCCL(std::shared_ptr<phi::distributed::Store> store, int rank,
                                   int size, int gid, std::chrono::milliseconds timeout,
                                   int device, phi::distributed::NCCLCommOptions options,
                                   bool high_priority_stream, std::string group_desc)
    : ProcessGroupWithStream(std::move(store), rank, size, gid, timeout, std::move(group_desc)),
      place_(phi::GPUPlace(device >= 0 ? device : DefaultDevice(rank))),
      options_(std::move(options)),
      high_priority_stream_(high_priority_stream) {
  PADDLE_ENFORCE_LT(place_.GetDeviceId(), phi::GetGPUDeviceCount(),
                    phi::errors::Unavailable("%s: gpu:%d is not visible.", Describe().c_str(),
                                             place_.GetDeviceId()));
  // Unset (the default): the group's timeout, resolved once for every backend.
  if (options_.timeout <= std::chrono::milliseconds::zero()) options_.timeout = this->timeout();
  if (FLAGS_eager_communication_connection) GetOrCreateCommContext(place_);
}

ProcessGroupNCCL::~ProcessGroupNCCL() {
  // Work queued on the comm streams uses the communicator: finish it first.
  ShutdownStreams();
  CommContextManager::Instance().Erase(CommContextManager::KeyOf("nccl", GetGid()), this);
}

std::shared_ptr<ProcessGroupNCCL> ProcessGroupNCCL::CreateProcessGroupNCCL(
    std::shared_ptr<phi::distributed::Store> store, int rank, int size, int gid,
    std::chrono::milliseconds timeout, int device, phi::distributed::NCCLCommOptions options) {
  auto pg = std::make_shared<ProcessGroupNCCL>(std::move(store), rank, size, gid, timeout,
                                               device, std::move(options));
  ProcessGroupIdMap::GetInstance().Insert(gid, pg);
  return pg;
}

NCCLCommContext* ProcessGroupNCCL::GetCommContext() {
  auto* comm = dynamic_cast<NCCLCommContext*>(GetOrCreateCommContext(place_));
  PADDLE_ENFORCE_NOT_NULL(comm, phi::errors::PreconditionNotMet(
                                    "%s: its communicator is not an NCCL one.",
                                    Describe().c_str()));
  return comm;
}

phi::distributed::CommContext* ProcessGroupNCCL::GetOrCreateCommContext(const phi::Place&) {
  return CommContextManager::Instance().GetOrCreate(
      CommContextManager::KeyOf("nccl", GetGid()), this, GetRank(), GetSize(), [this] {
        return NCCLCommContext::Create(store(), GetGid(), GetRank(), GetSize(),
                                       place_.GetDeviceId(), options_);
      });
}

void ProcessGroupNCCL::CheckPlace(const phi::Place& place) const {
  PADDLE_ENFORCE(place == place_,
                 phi::errors::InvalidArgument(
                     "%s runs on tensors of %s (this process's device), but the tensor is on "
                     "%s.",
                     Describe().c_str(), place_.DebugString().c_str(),
                     place.DebugString().c_str()));
}

phi::Place ProcessGroupNCCL::BarrierPlace(const BarrierOptions& opts) const {
  return opts.device_id >= 0 ? phi::GPUPlace(opts.device_id) : place_;
}

bool ProcessGroupNCCL::BlockingWait() const {
  return FLAGS_nccl_blocking_wait || FLAGS_comm_blocking_wait;
}

}  // namespace distributed
}  // namespace paddle_like
