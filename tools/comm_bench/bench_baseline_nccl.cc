// The raw NCCL baseline (compiled only where the CUDA toolkit and NCCL are).
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <vector>

#include "phi/core/distributed/nccl_tools_internal.h"
#include "phi/core/distributed/store/prefix_store.h"
#include "phi/core/errors.h"
#include "tools/comm_bench/bench_baseline.h"

namespace paddle_like {
namespace bench {
namespace {

using phi::distributed::ReduceOp;

void Cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    PADDLE_THROW(phi::errors::External("%s failed: %s", what, cudaGetErrorString(e)));
  }
}
void Nccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) {
    PADDLE_THROW(phi::errors::External("%s failed: %s", what, ncclGetErrorString(r)));
  }
}

class RawNccl : public RawAllReduce {
 public:
  RawNccl(const std::shared_ptr<phi::distributed::Store>& store, int rank, int size, int device,
          phi::DataType dtype, ReduceOp op)
      : dtype_(dtype) {
    Cuda(cudaSetDevice(device), "cudaSetDevice");
    phi::distributed::PrefixStore prefixed("comm_bench/raw_nccl", store);
    ncclUniqueId id;
    if (rank == 0) {
      Nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
      std::vector<uint8_t> bytes(sizeof(id));
      std::memcpy(bytes.data(), &id, sizeof(id));
      prefixed.set("unique_id", bytes);
    } else {
      auto bytes = prefixed.get("unique_id");
      std::memcpy(&id, bytes.data(), sizeof(id));
    }
    Nccl(ncclCommInitRank(&comm_, size, id, rank), "ncclCommInitRank");
    Cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    type_ = phi::distributed::ToNCCLDataType(dtype);
    switch (op) {
      case ReduceOp::PRODUCT: op_ = ncclProd; break;
      case ReduceOp::MIN: op_ = ncclMin; break;
      case ReduceOp::MAX: op_ = ncclMax; break;
      case ReduceOp::AVG: op_ = ncclAvg; break;
      default: op_ = ncclSum; break;
    }
  }
  ~RawNccl() override {
    Free();
    if (stream_) cudaStreamDestroy(stream_);
    if (comm_) ncclCommDestroy(comm_);
  }

  std::string Name() const override { return "ncclAllReduce"; }

  void Prepare(int64_t count, bool in_place) override {
    Free();
    count_ = count;
    size_t bytes = static_cast<size_t>(count) * phi::SizeOf(dtype_);
    Cuda(cudaMalloc(&in_, bytes), "cudaMalloc");
    Cuda(cudaMemset(in_, 0, bytes), "cudaMemset");
    out_ = in_;
    if (!in_place) {
      Cuda(cudaMalloc(&out_, bytes), "cudaMalloc");
    }
  }

  void Run(int iters) override {
    for (int i = 0; i < iters; ++i) {
      Nccl(ncclAllReduce(in_, out_, static_cast<size_t>(count_), type_, op_, comm_, stream_),
           "ncclAllReduce");
    }
    Cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

 private:
  void Free() {
    if (out_ && out_ != in_) cudaFree(out_);
    if (in_) cudaFree(in_);
    in_ = out_ = nullptr;
  }

  phi::DataType dtype_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  ncclDataType_t type_;
  ncclRedOp_t op_ = ncclSum;
  int64_t count_ = 0;
  void* in_ = nullptr;
  void* out_ = nullptr;
};

}  // namespace

std::unique_ptr<RawAllReduce> MakeRawNccl(const std::shared_ptr<phi::distributed::Store>& store,
                                          int rank, int size, int device, phi::DataType dtype,
                                          ReduceOp op) {
  return std::make_unique<RawNccl>(store, rank, size, device, dtype, op);
}

}  // namespace bench
}  // namespace paddle_like
