// Synchronisation operators.
//
//   barrier:             [X] -> [Out]; ring_id: every rank of the ring has arrived.
//   c_sync_calc_stream:  X -> Out (= X); the host waits for the calc stream.
//   c_sync_comm_stream:  X -> Out (= X); ring_id: later compute is ordered after the ring's
//                        comm ops: the pending ones this executor issued (their tasks) and
//                        anything else on the ring's comm stream (an event).
#include "paddle_like/operators/comm_ring.h"
#include "paddle_like/operators/register_ops.h"

namespace paddle_like {
namespace operators {

namespace {

// Out = X (shares storage) when the op has both and they are different variables.
void PassThrough(const ExecutionContext& ctx) {
  if (ctx.HasInput("X") && ctx.HasOutput("Out")) {
    const DenseTensor& x = ctx.Input("X");
    DenseTensor* out = ctx.Output("Out");
    if (out != &x) *out = x;
  }
}

void BarrierKernel(const ExecutionContext& ctx) {
  const CommOp comm = ResolveComm(ctx);
  comm.pg->Barrier()->Wait();
  PassThrough(ctx);
}

void SyncCalcStreamKernel(const ExecutionContext& ctx) {
  ctx.device_context()->Wait();
  PassThrough(ctx);
}

void SyncCommStreamKernel(const ExecutionContext& ctx) {
  const CommOp comm = ResolveComm(ctx);
  ctx.pending_comm()->WaitRing(comm.ring_id);
  phi::Stream* comm_stream = comm.pg->GetDeviceContext(ctx.GetPlace(), false)->stream();
  phi::Stream* calc_stream = ctx.device_context()->stream();
  if (comm_stream != calc_stream) {
    std::unique_ptr<phi::Event> done = comm_stream->CreateEvent();
    done->Record(comm_stream);
    calc_stream->WaitEvent(*done);
  }
  PassThrough(ctx);
}

}  // namespace

void RegisterSyncOps(KernelRegistry* r) {
  // Any dtype: they move no data.
  r->Register("barrier", phi::AllocationType::CPU, phi::DataType::UNDEFINED, BarrierKernel);
  r->Register("c_sync_calc_stream", phi::AllocationType::CPU, phi::DataType::UNDEFINED,
              SyncCalcStreamKernel);
  r->Register("c_sync_comm_stream", phi::AllocationType::CPU, phi::DataType::UNDEFINED,
              SyncCommStreamKernel);
}

}  // namespace operators
}  // namespace paddle_like
