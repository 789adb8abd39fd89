#include "distributed/process_group_cpu.h"

#include "phi/core/distributed/comm_context_manager.h"
#include "phi/core/errors.h"

namespace paddle_like {
namespace distributed {

using phi::distributed::CommContextManager;

ProcessGroupCpu::ProcessGroupCpu(std::shared_ptr<phi::distributed::Store> store, int rank,
                                 int size, int gid, std::chrono::milliseconds timeout,
                                 std::string comm_key, std::string group_desc)
    : ProcessGroupWithStream(std::move(store), rank, size, gid, timeout, std::move(group_desc)),
      comm_key_(std::move(comm_key)) {}

ProcessGroupCpu::~ProcessGroupCpu() {
  ShutdownStreams();
  CommContextManager::Instance().Erase(CommContextManager::KeyOf(comm_key_, GetGid()), this);
}

void ProcessGroupCpu::CreateCommContextNow(
    const std::function<void(phi::distributed::CommContext*)>& then) {
  try {
    phi::distributed::CommContext* comm = GetOrCreateCommContext(phi::CPUPlace());
    if (then) then(comm);
  } catch (...) {
    comm_.store(nullptr, std::memory_order_release);
    CommContextManager::Instance().Erase(CommContextManager::KeyOf(comm_key_, GetGid()), this);
    throw;
  }
}

phi::distributed::CommContext* ProcessGroupCpu::GetOrCreateCommContext(const phi::Place&) {
  // Every op asks: after the first, the answer is this group's own communicator (the
  // manager's entry belongs to this group until its destructor or a failed creation above).
  if (auto* comm = comm_.load(std::memory_order_acquire)) return comm;
  phi::distributed::CommContext* comm = CommContextManager::Instance().GetOrCreate(
      CommContextManager::KeyOf(comm_key_, GetGid()), this, GetRank(), GetSize(),
      [this] { return CreateCommContext(); });
  comm_.store(comm, std::memory_order_release);
  return comm;
}

void ProcessGroupCpu::SetCommTimeout(std::chrono::milliseconds timeout) {
  auto* comm = CommContextManager::Instance().Get(CommContextManager::KeyOf(comm_key_, GetGid()));
  if (comm != nullptr) comm->SetTimeout(timeout);
}

void ProcessGroupCpu::CheckPlace(const phi::Place& place) const {
  PADDLE_ENFORCE(place.is_cpu(),
                 phi::errors::InvalidArgument(
                     "ProcessGroup%s runs on CPU tensors, but the tensor is on %s.",
                     GetBackendName().c_str(), place.DebugString().c_str()));
}

}  // namespace distributed
}  // namespace paddle_like
