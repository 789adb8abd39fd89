// The NCCL engine as a CommContext: one ncclComm_t on one device. Every primitive is
// enqueued on the cudaStream_t of the Stream it is given and returns; completion is
// observed through events recorded on that stream (the engine's Task).
//
// Errors are typed phi errors carrying the NCCL version, ncclGetErrorString and
// ncclGetLastError (nccl_tools_internal.h); nothing exits the process.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "phi/core/distributed/comm_context.h"
#include "phi/core/distributed/store/store.h"

// NCCL's communicator handle, declared as nccl.h declares it, so that this header needs no
// NCCL include path; NCCL's result and op codes (C enums) pass as int.
struct ncclComm;
typedef struct ncclComm* ncclComm_t;

namespace phi {
namespace distributed {

struct NCCLReducePlan;  // nccl_tools_internal.h

struct NCCLCommOptions {
  // ncclCommInitRankConfig with the fields below instead of ncclCommInitRank.
  bool use_config = false;
  // config.blocking. A non-blocking communicator's calls return ncclInProgress; this
  // context then polls ncclCommGetAsyncError up to `timeout` (so even initialization
  // has a deadline) and aborts the communicator when it passes.
  bool blocking = true;
  int cga_cluster_size = -1;  // -1: NCCL's default
  int min_ctas = -1;
  int max_ctas = -1;
  std::string net_name;   // empty: NCCL's choice
  std::string comm_name;  // empty: "paddle_like-g<gid>"
  // <= 0 (the default): unset. A process group uses its own timeout; Create() alone uses
  // 30 minutes.
  std::chrono::milliseconds timeout = std::chrono::milliseconds(-1);
};

class NCCLCommContext : public CommContext {
 public:
  // Rank 0 makes an ncclUniqueId and publishes it in `store` under
  // "nccl/<gid>/unique_id/<n>" (n counts this process's communicators of the group, so a
  // re-created group never reads a stale id); the others read it; then every rank joins
  // on `device`.
  static std::unique_ptr<NCCLCommContext> Create(const std::shared_ptr<Store>& store, int gid,
                                                 int rank, int size, int device,
                                                 const NCCLCommOptions& options = {});
  // Takes ownership of an initialized communicator.
  NCCLCommContext(ncclComm_t comm, int gid, int rank, int size, int device,
                  const NCCLCommOptions& options);
  // ncclCommDestroy, or ncclCommAbort when NCCL reported an asynchronous error.
  ~NCCLCommContext() override;

  std::string BackendName() const override { return "NCCL"; }

  void AllReduce(const void* send, void* recv, int64_t count, DataType dtype,
                 const Reduction& reduction, Stream* stream) override;
  void Broadcast(const void* send, void* recv, int64_t count, DataType dtype, int root,
                 Stream* stream) override;
  void Reduce(const void* send, void* recv, int64_t count, DataType dtype,
              const Reduction& reduction, int root, Stream* stream) override;
  void AllGather(const void* send, void* recv, int64_t send_count, DataType dtype,
                 Stream* stream) override;
  void ReduceScatter(const void* send, void* recv, int64_t recv_count, DataType dtype,
                     const Reduction& reduction, Stream* stream) override;
  // Tags are ignored: NCCL matches point-to-point calls between a pair in call order.
  void Send(const void* send, int64_t count, DataType dtype, int peer, int tag,
            Stream* stream) override;
  // peer must be a rank (no any-source in NCCL); *source is set to peer.
  void Recv(void* recv, int64_t count, DataType dtype, int peer, int tag, Stream* stream,
            int* source = nullptr) override;
  bool SupportsAnySource() const override { return false; }

  // ncclGroupStart/End, counted per thread so that GroupAbort can close an open group.
  void GroupStart() override;
  void GroupEnd() override;
  // Closes the calling thread's innermost open group: ncclGroupEnd with its result
  // swallowed (NCCL has no way to drop a group's queued calls). No-op when none is open.
  void GroupAbort() override;
  // Open ncclGroupStart()s on the calling thread.
  static int GroupDepth();

  // Raises the asynchronous error NCCL recorded on this communicator, if any.
  void CheckAsyncError();
  // ncclCommAbort: pending and future operations fail instead of hanging. Idempotent.
  void Abort();
  void Abort(const std::string& why) override { (void)why; Abort(); }

  ncclComm_t comm() const { return comm_; }
  int device() const { return device_; }
  int gid() const { return gid_; }
  // "NCCLCommContext(gid 0, rank 1/2, gpu:1)"
  const std::string& Describe() const { return describe_; }

 private:
  // cudaStream_t of `stream`, after checking it is a CUDA stream on this device.
  void* CudaStreamOf(Stream* stream, const char* op) const;
  void CheckPeer(int peer, const char* op) const;
  // Turns an NCCL call's result into an exception; for a non-blocking communicator, waits
  // (up to options_.timeout) for ncclInProgress to settle outside a group.
  void Check(int result, const char* what);  // result: an ncclResult_t
  void WaitReady(const char* what);
  // ncclAvg/ncclSum/...: or a PREMUL_SUM op created for this call (destroyed after it, or
  // at the outermost GroupEnd).
  int MakeOp(const NCCLReducePlan& plan);  // an ncclRedOp_t
  void ReleaseOp(const NCCLReducePlan& plan, int op);
  // The body AllReduce, Reduce and ReduceScatter share: checks the stream, plans the
  // reduction of `count` elements and, on this device, runs `call(buffer, op, cuda_stream)`
  // with the op alive exactly as long as NCCL needs it. Defined in the .cc, its only user.
  template <typename Call>
  void RunReduction(const char* op_name, const char* nccl_name, Stream* stream, int64_t count,
                    DataType dtype, const Reduction& reduction, Call call);

  ncclComm_t comm_ = nullptr;
  int gid_;
  int device_;
  NCCLCommOptions options_;
  std::string describe_;
  bool aborted_ = false;
};

}  // namespace distributed
}  // namespace phi
