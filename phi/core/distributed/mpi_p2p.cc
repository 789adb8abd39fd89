// The MPI engine's point-to-point calls and groups: nonblocking sends and receives completed
// together, under the group's timeout (mpi_comm_context_internal.h).
#include <sched.h>

#include <exception>

#include "phi/core/distributed/mpi_comm_context_internal.h"

namespace phi {
namespace distributed {

void MpiCommContext::CheckPeer(int peer, bool any_allowed, const char* what) const {
  if (any_allowed && peer == kAnyPeer) return;
  PADDLE_ENFORCE(peer >= 0 && peer < GetSize() && peer != GetRank(),
                 errors::InvalidArgument("MPI %s rank %d: expected another rank in [0, %d).",
                                         what, peer, GetSize()));
}

int MpiCommContext::CheckTag(int tag) const {
  PADDLE_ENFORCE(tag >= 0 && tag <= tag_ub_,
                 errors::InvalidArgument("MPI tags are in [0, %d] (MPI_TAG_UB), got %d.",
                                         tag_ub_, tag));
  return tag;
}

MPI_Request MpiCommContext::Post(const DeferredP2P& op) {
  MpiBuffer b = MpiMoveBuffer(op.dtype, op.count);
  MPI_Request req = MPI_REQUEST_NULL;
  if (op.is_send) {
    Call(MPI_Isend(op.src, b.count, b.type, op.peer, CheckTag(op.tag), comm_, &req),
         "MPI_Isend");
  } else {
    Call(MPI_Irecv(op.dst, b.count, b.type, op.peer == kAnyPeer ? MPI_ANY_SOURCE : op.peer,
                   CheckTag(op.tag), comm_, &req),
         "MPI_Irecv");
  }
  return req;
}

void MpiCommContext::WaitAll(std::vector<MPI_Request>* reqs, std::vector<MPI_Status>* statuses,
                             const char* what) {
  statuses->resize(reqs->size());
  const int n = static_cast<int>(reqs->size());
  const auto deadline = std::chrono::steady_clock::now() + timeout_.load();
  for (unsigned spins = 0;; ++spins) {
    int done = 0;
    const int rc = MPI_Testall(n, reqs->data(), &done, statuses->data());
    if (rc != MPI_SUCCESS) Call(FailedCode(rc, statuses->data(), n), what);
    if (done) return;
    // Checked now and then: a clock read costs more than a poll of shared memory.
    if ((spins & 1023) == 1023) {
      std::string why = Broken();
      if (why.empty() && std::chrono::steady_clock::now() >= deadline) {
        why = std::string(what) + " did not complete within " +
              std::to_string(timeout_.load().count()) + " ms";
        MarkBroken(describe() + ": " + why);
      }
      if (!why.empty()) {
        // Receives can be cancelled; sends MPI may not take back, so their requests are let
        // go (the communicator is broken from here on and nothing reuses them).
        for (auto& r : *reqs) {
          if (r == MPI_REQUEST_NULL) continue;
          MPI_Cancel(&r);
          MPI_Request_free(&r);
        }
        if (why.rfind("aborted", 0) == 0 || why.find("unusable") != std::string::npos) {
          PADDLE_THROW(errors::Unavailable("%s: %s interrupted: %s", describe().c_str(), what,
                                           why.c_str()));
        }
        PADDLE_THROW(errors::Timeout("%s: %s", describe().c_str(), why.c_str()));
      }
      sched_yield();  // two ranks on two cores: let the peer (or its progress) run
    }
  }
}

void MpiCommContext::Send(const void* send, int64_t count, DataType dtype, int peer, int tag,
                          Stream*) {
  CheckPeer(peer, false, "send to");
  const DeferredP2P op{true, send, nullptr, count, dtype, peer, tag, nullptr};
  if (DeferToGroup(op)) return;  // posted at GroupEnd
  RunP2PBatch({op});
}

void MpiCommContext::Recv(void* recv, int64_t count, DataType dtype, int peer, int tag,
                          Stream*, int* source) {
  CheckPeer(peer, true, "recv from");
  const DeferredP2P op{false, nullptr, recv, count, dtype, peer, tag, source};
  if (DeferToGroup(op)) return;  // posted at GroupEnd
  RunP2PBatch({op});
}

void MpiCommContext::RunP2PBatch(const std::vector<DeferredP2P>& ops) {
  if (ops.empty()) return;
  ThrowIfBroken();
  std::vector<MPI_Request> reqs;
  reqs.reserve(ops.size());
  std::exception_ptr first;
  for (const auto& op : ops) {
    try {
      reqs.push_back(Post(op));
    } catch (...) {
      first = std::current_exception();
      break;
    }
  }
  std::vector<MPI_Status> statuses;
  try {
    // Also after a failed post: what was posted completes (or the timeout ends it).
    WaitAll(&reqs, &statuses, "send/recv");
  } catch (...) {
    if (!first) first = std::current_exception();
  }
  if (first) std::rethrow_exception(first);
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!ops[i].is_send) CheckReceived(ops[i], statuses[i]);
  }
}

void MpiCommContext::CheckReceived(const DeferredP2P& op, const MPI_Status& status) const {
  int got = 0;
  MPI_Get_count(&status, MpiMoveBuffer(op.dtype, op.count).type, &got);
  const int want = MpiMoveBuffer(op.dtype, op.count).count;
  PADDLE_ENFORCE(got == want,
                 errors::InvalidArgument(
                     "%s: recv from rank %d (tag %d) expected %d elements but the sender "
                     "sent %d.",
                     describe().c_str(), status.MPI_SOURCE, op.tag, want, got));
  if (op.source != nullptr) *op.source = status.MPI_SOURCE;
}

int MpiCommContext::FailedCode(int rc, const MPI_Status* statuses, int n) {
  if (rc != MPI_ERR_IN_STATUS) return rc;
  for (int i = 0; i < n; ++i) {  // the failing request's own code
    const int e = statuses[i].MPI_ERROR;
    if (e != MPI_SUCCESS && e != MPI_ERR_PENDING) return e;
  }
  return rc;
}

}  // namespace distributed
}  // namespace phi
