// The raw MPI baseline: MPI_Allreduce on a communicator of its own (a duplicate of
// MPI_COMM_WORLD), in the processes that run the engine's all-reduce, alternating with it.
#include <mpi.h>

#include <vector>

#include "phi/core/distributed/mpi_comm_context.h"
#include "phi/core/distributed/mpi_comm_context_internal.h"
#include "tools/comm_bench/bench_baseline.h"

namespace paddle_like {
namespace bench {
namespace {

using phi::distributed::CheckMpi;
using phi::distributed::ReduceOp;

class RawMpi : public RawAllReduce {
 public:
  RawMpi(phi::DataType dtype, ReduceOp op) : dtype_(dtype) {
    phi::distributed::EnsureMpiInitialized();
    PADDLE_ENFORCE(!phi::IsComplex(dtype) && dtype != phi::DataType::BOOL,
                   phi::errors::Unimplemented("no raw MPI baseline for %s",
                                              phi::DataTypeToString(dtype)));
    // The same MPI type and op the engine uses (MPI's own for the usual types).
    red_ = phi::distributed::MpiReductionFor(dtype, op);
    CheckMpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup", "the raw baseline");
  }
  ~RawMpi() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }

  std::string Name() const override { return "MPI_Allreduce"; }

  void Prepare(int64_t count, bool in_place) override {
    count_ = phi::distributed::MpiCount(count, "raw allreduce");
    in_place_ = in_place;
    const size_t bytes = static_cast<size_t>(count) * phi::SizeOf(dtype_);
    in_.assign(bytes, 0);
    out_.assign(in_place ? 0 : bytes, 0);
  }

  void Run(int iters) override {
    const void* send = in_place_ ? MPI_IN_PLACE : in_.data();
    void* recv = in_place_ ? in_.data() : out_.data();
    for (int i = 0; i < iters; ++i) {
      CheckMpi(MPI_Allreduce(send, recv, count_, red_.type, red_.op, comm_), "MPI_Allreduce",
               "the raw baseline");
    }
  }

 private:
  phi::DataType dtype_;
  phi::distributed::MpiReduction red_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int count_ = 0;
  bool in_place_ = false;
  std::vector<char> in_, out_;
};

}  // namespace

std::unique_ptr<RawAllReduce> MakeRawMpi(phi::DataType dtype, ReduceOp op) {
  return std::make_unique<RawMpi>(dtype, op);
}

}  // namespace bench
}  // namespace paddle_like
