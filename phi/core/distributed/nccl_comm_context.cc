#include "phi/core/distributed/nccl_comm_context.h"

#include <nccl.h>

#include <cuda_runtime_api.h>

#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <glog/logging.h>

#include "phi/core/cuda_stream.h"
#include "phi/core/device_info.h"
#include "phi/core/distributed/nccl_tools_internal.h"
#include "phi/core/distributed/store/prefix_store.h"
#include "phi/core/errors.h"
#include "phi/core/stream.h"

namespace phi {
namespace distributed {

namespace {

// Per thread, like NCCL's own group depth: the groups this thread opened, and the
// PREMUL_SUM ops created inside them (destroyed once the outermost group is issued).
struct ThreadGroupState {
  int depth = 0;
  std::vector<std::pair<ncclComm_t, ncclRedOp_t>> deferred_ops;
};
thread_local ThreadGroupState tls_group;

void DestroyDeferredOps() {
  for (auto& [comm, op] : tls_group.deferred_ops) {
    ncclResult_t r = ncclRedOpDestroy(op, comm);
    if (r != ncclSuccess) LOG(WARNING) << "ncclRedOpDestroy: " << ncclGetErrorString(r);
  }
  tls_group.deferred_ops.clear();
}

// Communicators of a group this process created so far (its unique-id generation).
int NextGeneration(int gid) {
  static std::mutex mu;
  static std::map<int, int> generations;
  std::lock_guard<std::mutex> lk(mu);
  return generations[gid]++;
}

// Polls a non-blocking communicator until its state leaves ncclInProgress. Returns the
// final state; on the deadline aborts the communicator and raises TimeoutError.
// An unset timeout (<= 0) with no group to take one from: 30 minutes.
NCCLCommOptions WithTimeout(NCCLCommOptions o) {
  if (o.timeout <= std::chrono::milliseconds::zero()) o.timeout = std::chrono::minutes(30);
  return o;
}

ncclResult_t PollComm(ncclComm_t comm, std::chrono::milliseconds timeout, const char* what,
                      const std::string& context) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  ncclResult_t state = ncclInProgress;
  while (true) {
    ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) return r;
    if (state != ncclInProgress) return state;
    if (std::chrono::steady_clock::now() >= deadline) {
      ncclCommAbort(comm);
      PADDLE_THROW(errors::Timeout("%s on %s did not complete within %lld ms; the "
                                   "communicator was aborted.",
                                   what, context.c_str(),
                                   static_cast<long long>(timeout.count())));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

std::string DescribeComm(int gid, int rank, int size, int device) {
  return "NCCLCommContext(gid " + std::to_string(gid) + ", rank " + std::to_string(rank) + "/" +
         std::to_string(size) + ", gpu:" + std::to_string(device) + ")";
}

}  // namespace

// ------------------------------------------------------------------ creation
std::unique_ptr<NCCLCommContext> NCCLCommContext::Create(const std::shared_ptr<Store>& store,
                                                         int gid, int rank, int size,
                                                         int device,
                                                         const NCCLCommOptions& given) {
  const NCCLCommOptions options = WithTimeout(given);
  const std::string context = DescribeComm(gid, rank, size, device);
  PADDLE_ENFORCE_NOT_NULL(store, errors::InvalidArgument("%s: no store to exchange the NCCL "
                                                         "unique id through.",
                                                         context.c_str()));
  PADDLE_ENFORCE(size >= 1 && rank >= 0 && rank < size,
                 errors::InvalidArgument("%s: rank must be in [0, size).", context.c_str()));
  const int devices = GetGPUDeviceCount();
  if (device < 0 || device >= devices) {
    PADDLE_THROW(errors::Unavailable("%s: device gpu:%d is not visible (%d CUDA device(s)%s%s).",
                                     context.c_str(), device, devices,
                                     devices == 0 ? ": " : "",
                                     GPUUnavailableReason().c_str()));
  }

  PrefixStore prefixed("nccl/" + std::to_string(gid), store);
  const std::string key = "unique_id/" + std::to_string(NextGeneration(gid));
  ncclUniqueId id;
  if (rank == 0) {
    CheckNCCL(ncclGetUniqueId(&id), "ncclGetUniqueId", nullptr, context);
    const auto* bytes = reinterpret_cast<const uint8_t*>(&id);
    prefixed.set(key, std::vector<uint8_t>(bytes, bytes + sizeof(id)));
  } else {
    std::vector<uint8_t> bytes;
    try {
      bytes = prefixed.get(key);
    } catch (...) {
      RethrowWithContext(std::current_exception(),
                         context + ": waiting for rank 0's NCCL unique id (store key nccl/" +
                             std::to_string(gid) + "/" + key + ")");
    }
    PADDLE_ENFORCE_EQ(bytes.size(), sizeof(id),
                      errors::External("%s: the NCCL unique id in the store is malformed.",
                                       context.c_str()));
    std::memcpy(&id, bytes.data(), sizeof(id));
  }

  CudaDeviceGuard guard(device);
  ncclComm_t comm = nullptr;
  ncclResult_t r;
  const std::string comm_name =
      options.comm_name.empty() ? "paddle_like-g" + std::to_string(gid) : options.comm_name;
  if (options.use_config || !options.blocking) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = options.blocking ? 1 : 0;
    if (options.cga_cluster_size >= 0) config.cgaClusterSize = options.cga_cluster_size;
    if (options.min_ctas > 0) config.minCTAs = options.min_ctas;
    if (options.max_ctas > 0) config.maxCTAs = options.max_ctas;
    if (!options.net_name.empty()) config.netName = options.net_name.c_str();
    config.commName = comm_name.c_str();
    r = ncclCommInitRankConfig(&comm, size, id, rank, &config);
    if (r == ncclInProgress) r = PollComm(comm, options.timeout, "ncclCommInitRankConfig", context);
    if (r != ncclSuccess && comm != nullptr) {
      std::string last = ncclGetLastError(comm);
      ncclCommAbort(comm);
      CheckNCCL(r, ("ncclCommInitRankConfig (" + last + ")").c_str(), nullptr, context);
    }
    CheckNCCL(r, "ncclCommInitRankConfig", nullptr, context);
  } else {
    r = ncclCommInitRank(&comm, size, id, rank);
    CheckNCCL(r, "ncclCommInitRank", nullptr, context);
  }
  VLOG(1) << context << ": communicator ready (NCCL " << NCCLVersionString() << ")";
  return std::make_unique<NCCLCommContext>(comm, gid, rank, size, device, options);
}

NCCLCommContext::NCCLCommContext(ncclComm_t comm, int gid, int rank, int size, int device,
                                 const NCCLCommOptions& options)
    : CommContext(rank, size),
      comm_(comm),
      gid_(gid),
      device_(device),
      options_(WithTimeout(options)),
      describe_(DescribeComm(gid, rank, size, device)) {}

NCCLCommContext::~NCCLCommContext() {
  if (comm_ == nullptr) return;
  int previous = -1;
  bool restore = cudaGetDevice(&previous) == cudaSuccess && previous != device_;
  if (restore) cudaSetDevice(device_);
  ncclResult_t async = ncclSuccess;
  if (ncclCommGetAsyncError(comm_, &async) != ncclSuccess) async = ncclInternalError;
  if (async != ncclSuccess && async != ncclInProgress) {
    LOG(WARNING) << describe_ << ": aborting the communicator after an asynchronous NCCL error: "
                 << ncclGetErrorString(async);
    ncclCommAbort(comm_);
  } else {
    bool finalized = true;
    if (!options_.blocking) {
      try {
        finalized = ncclCommFinalize(comm_) == ncclSuccess ||
                    PollComm(comm_, options_.timeout, "ncclCommFinalize", describe_) ==
                        ncclSuccess;
      } catch (const std::exception& e) {  // timed out: PollComm aborted the communicator
        LOG(WARNING) << e.what();
        comm_ = nullptr;
      }
    }
    if (comm_ != nullptr) {
      ncclResult_t r = finalized ? ncclCommDestroy(comm_) : ncclCommAbort(comm_);
      if (r != ncclSuccess) {
        LOG(WARNING) << describe_ << ": destroying the communicator: " << ncclGetErrorString(r);
      }
    }
  }
  comm_ = nullptr;
  cudaGetLastError();
  if (restore) cudaSetDevice(previous);
}

void NCCLCommContext::Abort() {
  if (comm_ == nullptr) return;
  ncclResult_t r = ncclCommAbort(comm_);
  if (r != ncclSuccess) LOG(WARNING) << describe_ << ": ncclCommAbort: " << ncclGetErrorString(r);
  comm_ = nullptr;
  aborted_ = true;
}

void NCCLCommContext::CheckAsyncError() {
  PADDLE_ENFORCE(!aborted_, errors::Unavailable("%s was aborted.", describe_.c_str()));
  ncclResult_t async = ncclSuccess;
  CheckNCCL(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError", comm_, describe_);
  if (async != ncclInProgress) CheckNCCL(async, "an asynchronous operation", comm_, describe_);
}

// ------------------------------------------------------------------ helpers
void* NCCLCommContext::CudaStreamOf(Stream* stream, const char* op) const {
  PADDLE_ENFORCE(!aborted_, errors::Unavailable("%s: %s on an aborted communicator.",
                                                describe_.c_str(), op));
  void* handle = stream == nullptr ? nullptr : stream->native_handle();
  PADDLE_ENFORCE(handle != nullptr && stream->place() == GPUPlace(device_),
                 errors::InvalidArgument(
                     "%s: %s must run on a CUDA stream of gpu:%d, got %s.", describe_.c_str(),
                     op, device_, stream == nullptr ? "no stream" : stream->DebugString().c_str()));
  return handle;
}

void NCCLCommContext::CheckPeer(int peer, const char* op) const {
  PADDLE_ENFORCE(peer >= 0 && peer < GetSize(),
                 errors::OutOfRange("%s: %s with rank %d, outside [0, %d).", describe_.c_str(),
                                    op, peer, GetSize()));
}

void NCCLCommContext::Check(int code, const char* what) {
  const auto result = static_cast<ncclResult_t>(code);
  if (result == ncclInProgress) {
    // Only a non-blocking communicator answers so; inside a group the calls are queued
    // and the outermost GroupEnd waits.
    if (tls_group.depth == 0) WaitReady(what);
    return;
  }
  CheckNCCL(result, what, comm_, describe_);
}

void NCCLCommContext::WaitReady(const char* what) {
  ncclResult_t state = PollComm(comm_, options_.timeout, what, describe_);
  CheckNCCL(state, what, comm_, describe_);
}

int NCCLCommContext::MakeOp(const NCCLReducePlan& plan) {
  if (!plan.premul) return plan.op;
  ncclRedOp_t op;
  auto scalar = plan.scalar;  // NCCL copies a host-immediate scalar at creation
  Check(ncclRedOpCreatePreMulSum(&op, scalar.data(), plan.buffer.dtype, ncclScalarHostImmediate,
                                 comm_),
        "ncclRedOpCreatePreMulSum");
  return op;
}

void NCCLCommContext::ReleaseOp(const NCCLReducePlan& plan, int code) {
  const auto op = static_cast<ncclRedOp_t>(code);
  if (!plan.premul) return;
  if (tls_group.depth > 0) {
    tls_group.deferred_ops.emplace_back(comm_, op);
    return;
  }
  ncclResult_t r = ncclRedOpDestroy(op, comm_);
  if (r != ncclSuccess) LOG(WARNING) << describe_ << ": ncclRedOpDestroy: " << ncclGetErrorString(r);
}

template <typename Call>
void NCCLCommContext::RunReduction(const char* op_name, const char* nccl_name, Stream* stream,
                                   int64_t count, DataType dtype, const Reduction& reduction,
                                   Call call) {
  auto s = static_cast<cudaStream_t>(CudaStreamOf(stream, op_name));
  NCCLReducePlan plan = PlanNCCLReduction(dtype, count, reduction);
  CudaDeviceGuard guard(device_);
  // The op is released before the result is checked, so a failed call does not leak it.
  auto op = static_cast<ncclRedOp_t>(MakeOp(plan));
  ncclResult_t r = call(plan.buffer, op, s);
  ReleaseOp(plan, op);
  Check(r, nccl_name);
}

// ------------------------------------------------------------------ primitives
void NCCLCommContext::AllReduce(const void* send, void* recv, int64_t count, DataType dtype,
                                const Reduction& reduction, Stream* stream) {
  RunReduction("AllReduce", "ncclAllReduce", stream, count, dtype, reduction,
               [&](const NCCLBuffer& b, ncclRedOp_t op, cudaStream_t s) {
                 return ncclAllReduce(send, recv, b.count, b.dtype, op, comm_, s);
               });
}

void NCCLCommContext::Broadcast(const void* send, void* recv, int64_t count, DataType dtype,
                                int root, Stream* stream) {
  auto s = static_cast<cudaStream_t>(CudaStreamOf(stream, "Broadcast"));
  NCCLBuffer b = ToNCCLBuffer(dtype, count);
  // Only the root's send buffer is read; elsewhere NCCL writes recv in place.
  const void* src = (GetRank() == root && send != nullptr) ? send : recv;
  CudaDeviceGuard guard(device_);
  Check(ncclBroadcast(src, recv, b.count, b.dtype, root, comm_, s), "ncclBroadcast");
}

void NCCLCommContext::Reduce(const void* send, void* recv, int64_t count, DataType dtype,
                             const Reduction& reduction, int root, Stream* stream) {
  RunReduction("Reduce", "ncclReduce", stream, count, dtype, reduction,
               [&](const NCCLBuffer& b, ncclRedOp_t op, cudaStream_t s) {
                 return ncclReduce(send, recv, b.count, b.dtype, op, root, comm_, s);
               });
}

void NCCLCommContext::AllGather(const void* send, void* recv, int64_t send_count,
                                DataType dtype, Stream* stream) {
  auto s = static_cast<cudaStream_t>(CudaStreamOf(stream, "AllGather"));
  NCCLBuffer b = ToNCCLBuffer(dtype, send_count);
  CudaDeviceGuard guard(device_);
  Check(ncclAllGather(send, recv, b.count, b.dtype, comm_, s), "ncclAllGather");
}

void NCCLCommContext::ReduceScatter(const void* send, void* recv, int64_t recv_count,
                                    DataType dtype, const Reduction& reduction,
                                    Stream* stream) {
  RunReduction("ReduceScatter", "ncclReduceScatter", stream, recv_count, dtype, reduction,
               [&](const NCCLBuffer& b, ncclRedOp_t op, cudaStream_t s) {
                 return ncclReduceScatter(send, recv, b.count, b.dtype, op, comm_, s);
               });
}

void NCCLCommContext::Send(const void* send, int64_t count, DataType dtype, int peer, int tag,
                           Stream* stream) {
  auto s = static_cast<cudaStream_t>(CudaStreamOf(stream, "Send"));
  CheckPeer(peer, "Send");
  NCCLBuffer b = ToNCCLBuffer(dtype, count);
  CudaDeviceGuard guard(device_);
  Check(ncclSend(send, b.count, b.dtype, peer, comm_, s), "ncclSend");
}

void NCCLCommContext::Recv(void* recv, int64_t count, DataType dtype, int peer, int tag,
                           Stream* stream, int* source) {
  auto s = static_cast<cudaStream_t>(CudaStreamOf(stream, "Recv"));
  if (peer == kAnyPeer) {
    PADDLE_THROW(errors::Unimplemented(
        "%s: receiving from any source is not supported by NCCL; name the source rank.",
        describe_.c_str()));
  }
  CheckPeer(peer, "Recv");
  NCCLBuffer b = ToNCCLBuffer(dtype, count);
  CudaDeviceGuard guard(device_);
  Check(ncclRecv(recv, b.count, b.dtype, peer, comm_, s), "ncclRecv");
  if (source != nullptr) *source = peer;
}

// ------------------------------------------------------------------ groups
int NCCLCommContext::GroupDepth() { return tls_group.depth; }

void NCCLCommContext::GroupStart() {
  CheckNCCL(ncclGroupStart(), "ncclGroupStart", comm_, describe_);
  ++tls_group.depth;
}

void NCCLCommContext::GroupEnd() {
  PADDLE_ENFORCE_GT(tls_group.depth, 0,
                    errors::PreconditionNotMet("%s: GroupEnd without a GroupStart on this "
                                               "thread.",
                                               describe_.c_str()));
  --tls_group.depth;  // closed whatever ncclGroupEnd answers
  ncclResult_t r;
  {
    CudaDeviceGuard guard(device_);
    r = ncclGroupEnd();
  }
  if (tls_group.depth == 0) DestroyDeferredOps();
  Check(r, "ncclGroupEnd");
}

void NCCLCommContext::GroupAbort() {
  if (tls_group.depth == 0) return;
  --tls_group.depth;
  ncclResult_t r = ncclGroupEnd();
  if (r != ncclSuccess && r != ncclInProgress) {
    LOG(WARNING) << describe_ << ": ncclGroupEnd while closing a failed group: "
                 << ncclGetErrorString(r);
  }
  if (tls_group.depth == 0) DestroyDeferredOps();
}

}  // namespace distributed
}  // namespace phi
