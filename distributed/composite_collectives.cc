// The collectives the engine builds out of CommContext primitives (grouped Send/Recv):
// Scatter, Gather, AllToAll (equal, unequal, list), point-to-point, and Barrier. Written
// once here for every backend.
#include <numeric>

#include "distributed/engine_checks.h"
#include "distributed/process_group_with_stream.h"
#include "distributed/stream_task.h"
#include "phi/core/errors.h"
#include "phi/core/memcpy.h"

namespace paddle_like {
namespace distributed {

using phi::DataType;
using phi::DenseTensor;
using phi::distributed::CommContext;
using phi::distributed::CommGroupGuard;
using phi::distributed::Reduction;
using namespace engine;  // NOLINT: the engine's own checks

// ------------------------------------------------------------------ built from send/recv
ProcessGroup::TaskPtr ProcessGroupWithStream::Scatter(DenseTensor* out, const DenseTensor& in,
                                                      const ScatterOptions& opts, bool sync_op,
                                                      bool use_calc_stream) {
  return Guarded(CommType::SCATTER, [&]() -> TaskPtr {
    CheckRank(opts.root_rank, GetSize(), "scatter root rank");
    const int root = static_cast<int>(opts.root_rank);
    const int rank = GetRank(), size = GetSize();
    PADDLE_ENFORCE_NOT_NULL(out, phi::errors::InvalidArgument("The output tensor is null."));
    CheckTensor(*out, "output");
    int64_t n = out->numel();
    const void* src = nullptr;
    if (rank == root) {
      CheckTensor(in, "input");
      CheckSameDtype(in, "input", *out, "output");
      CheckNumel(in.numel(), n * size, "scatter input (group size x output)");
      src = in.data();
    }
    void* dst = out->data();
    DataType dt = out->dtype();
    size_t bytes = static_cast<size_t>(n) * phi::SizeOf(dt);
    phi::Place place = out->place();
    OpDesc d{CommType::SCATTER, 0, rank == root ? n * size : 0, n, dt, root};
    return Run(std::move(d), place, {rank == root ? &in : nullptr, out},
               [=](CommContext* c, phi::Stream* s, TaskState*) {
                 if (c->HasNativeGatherScatter()) {
                   c->Scatter(src, dst, n, dt, root, s);
                   return;
                 }
                 if (rank != root) {
                   c->Recv(dst, n, dt, root, 0, s);
                   return;
                 }
                 CommGroupGuard group(c);
                 for (int r = 0; r < size; ++r) {
                   if (r != root) c->Send(Bytes(src) + r * bytes, n, dt, r, 0, s);
                 }
                 group.End();
                 phi::memory::Copy(place, dst, place, Bytes(src) + root * bytes, bytes, s);
               },
               sync_op, use_calc_stream);
  });
}

namespace {
// Root receives `size` blocks of `n` elements into dsts[r] (its own block is copied).
void GatherBlocks(CommContext* c, phi::Stream* s, const void* src, const std::vector<void*>& dsts,
                  int64_t n, DataType dt, int root, const phi::Place& place) {
  const int rank = c->GetRank(), size = c->GetSize();
  size_t bytes = static_cast<size_t>(n) * phi::SizeOf(dt);
  if (c->HasNativeGatherScatter()) {
    // The root's blocks are one buffer (the tensor form), or are gathered into scratch and
    // copied out (the list form): every rank runs the same native call either way.
    bool contiguous = rank == root;
    for (int r = 1; contiguous && r < size; ++r) {
      contiguous = Bytes(dsts[r]) == Bytes(dsts[0]) + r * bytes;
    }
    std::vector<char> scratch;
    if (rank == root && !contiguous) scratch.resize(bytes * static_cast<size_t>(size));
    void* recv = rank != root ? nullptr : contiguous ? dsts[0] : scratch.data();
    c->Gather(src, recv, n, dt, root, s);
    if (!scratch.empty()) {
      for (int r = 0; r < size; ++r) {
        phi::memory::Copy(place, dsts[r], place, scratch.data() + r * bytes, bytes, s);
      }
    }
    return;
  }
  if (rank != root) {
    c->Send(src, n, dt, root, 0, s);
    return;
  }
  CommGroupGuard group(c);
  for (int r = 0; r < size; ++r) {
    if (r != root) c->Recv(dsts[r], n, dt, r, 0, s);
  }
  group.End();
  phi::memory::Copy(place, dsts[root], place, src, bytes, s);
}
}  // namespace

ProcessGroup::TaskPtr ProcessGroupWithStream::Gather(DenseTensor* out, const DenseTensor& in,
                                                     const GatherOptions& opts, bool sync_op,
                                                     bool use_calc_stream) {
  return Guarded(CommType::GATHER, [&]() -> TaskPtr {
    // One tensor of `size` blocks is the list form over views of its blocks.
    CheckTensor(in, "input");
    CheckRank(opts.root_rank, GetSize(), "gather root rank");
    std::vector<DenseTensor> blocks;
    if (GetRank() == opts.root_rank) {
      const int64_t n = in.numel();
      PrepareOutput(out, in, n * GetSize(), "output");
      for (int r = 0; r < GetSize(); ++r) blocks.push_back(out->FlatView(r * n, n));
    }
    return Gather(&blocks, in, opts, sync_op, use_calc_stream);
  });
}

ProcessGroup::TaskPtr ProcessGroupWithStream::Gather(std::vector<DenseTensor>* outs,
                                                     const DenseTensor& in,
                                                     const GatherOptions& opts, bool sync_op,
                                                     bool use_calc_stream) {
  return Guarded(CommType::GATHER, [&]() -> TaskPtr {
    CheckTensor(in, "input");
    CheckRank(opts.root_rank, GetSize(), "gather root rank");
    const int root = static_cast<int>(opts.root_rank);
    const int size = GetSize();
    int64_t n = in.numel();
    std::vector<void*> dsts(size, nullptr);
    std::vector<const DenseTensor*> tensors{&in};
    if (GetRank() == root) {
      PADDLE_ENFORCE_NOT_NULL(outs, phi::errors::InvalidArgument("The output list is null."));
      if (outs->empty()) outs->resize(size);
      PADDLE_ENFORCE(static_cast<int>(outs->size()) == size,
                     phi::errors::InvalidArgument(
                         "Gather into a list needs one output tensor per rank (%d), but the list "
                         "has %zu.",
                         size, outs->size()));
      for (int r = 0; r < size; ++r) {
        PrepareOutput(&(*outs)[r], in, n, "gather list output");
        dsts[r] = (*outs)[r].data();
        tensors.push_back(&(*outs)[r]);
      }
    }
    const void* src = in.data();
    DataType dt = in.dtype();
    phi::Place place = in.place();
    OpDesc d{CommType::GATHER, 0, n, GetRank() == root ? n * size : 0, dt, root};
    return Run(std::move(d), place, tensors,
               [=](CommContext* c, phi::Stream* s, TaskState*) {
                 GatherBlocks(c, s, src, dsts, n, dt, root, place);
               },
               sync_op, use_calc_stream);
  });
}

namespace {
// The all-to-all exchange: block r of the send side goes to rank r, block r of the receive
// side comes from rank r. One group of sends and receives, so crossing orders never block.
void ExchangeBlocks(CommContext* c, phi::Stream* s, const std::vector<const void*>& srcs,
                    const std::vector<void*>& dsts, const std::vector<int64_t>& send_counts,
                    const std::vector<int64_t>& recv_counts, DataType dt,
                    const phi::Place& place) {
  const int rank = c->GetRank(), size = c->GetSize();
  CommGroupGuard group(c);
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    if (send_counts[r] > 0) c->Send(srcs[r], send_counts[r], dt, r, 0, s);
    if (recv_counts[r] > 0) c->Recv(dsts[r], recv_counts[r], dt, r, 0, s);
  }
  group.End();
  phi::memory::Copy(place, dsts[rank], place, srcs[rank],
                    static_cast<size_t>(send_counts[rank]) * phi::SizeOf(dt), s);
}
}  // namespace

ProcessGroup::TaskPtr ProcessGroupWithStream::AllToAll(
    DenseTensor* out, const DenseTensor& in, const std::vector<int64_t>& out_split_sizes,
    const std::vector<int64_t>& in_split_sizes, bool sync_op, bool use_calc_stream) {
  return Guarded(CommType::ALLTOALL, [&]() -> TaskPtr {
    CheckTensor(in, "input");
    PADDLE_ENFORCE_NOT_NULL(out, phi::errors::InvalidArgument("The output tensor is null."));
    const int size = GetSize(), rank = GetRank();
    if (!out->initialized()) out->AllocateLike(in.place(), in.dtype(), AllToAllOutputDims(in, out_split_sizes));
    CheckTensor(*out, "output");
    CheckNoOverlap(in, *out, "AllToAll");
    CheckSameDtype(*out, "output", in, "input");
    Splits send = MakeSplits(in_split_sizes, in, size, "input");
    Splits recv = MakeSplits(out_split_sizes, *out, size, "output");
    PADDLE_ENFORCE(send.counts[rank] == recv.counts[rank],
                   phi::errors::InvalidArgument(
                       "AllToAll: this rank sends itself %lld elements but expects %lld.",
                       static_cast<long long>(send.counts[rank]),
                       static_cast<long long>(recv.counts[rank])));
    size_t es = in.element_size();
    std::vector<const void*> srcs(size);
    std::vector<void*> dsts(size);
    for (int r = 0; r < size; ++r) {
      srcs[r] = Bytes(in.data()) + send.offsets[r] * es;
      dsts[r] = Bytes(out->data()) + recv.offsets[r] * es;
    }
    DataType dt = in.dtype();
    phi::Place place = in.place();
    OpDesc d{CommType::ALLTOALL, 0, in.numel(), out->numel(), dt, -1};
    return Run(std::move(d), place, {&in, out},
               [=, sc = send.counts, rc = recv.counts, so = send.offsets,
                ro = recv.offsets, src = in.data(), dst = out->data()](
                   CommContext* c, phi::Stream* s, TaskState*) {
                 // One contiguous buffer each way: the engine's native form where it has one.
                 if (c->AllToAllV(src, sc, so, dst, rc, ro, dt, s)) return;
                 ExchangeBlocks(c, s, srcs, dsts, sc, rc, dt, place);
               },
               sync_op, use_calc_stream);
  });
}

ProcessGroup::TaskPtr ProcessGroupWithStream::AllToAll(std::vector<DenseTensor>* outs,
                                                       const std::vector<DenseTensor>& ins,
                                                       bool sync_op, bool use_calc_stream) {
  return Guarded(CommType::ALLTOALL, [&]() -> TaskPtr {
    const int size = GetSize();
    PADDLE_ENFORCE_NOT_NULL(outs, phi::errors::InvalidArgument("The output list is null."));
    PADDLE_ENFORCE(static_cast<int>(ins.size()) == size,
                   phi::errors::InvalidArgument(
                       "AllToAll needs one input tensor per rank (%d), but got %zu.", size,
                       ins.size()));
    PADDLE_ENFORCE(static_cast<int>(outs->size()) == size,
                   phi::errors::InvalidArgument(
                       "AllToAll needs one output tensor per rank (%d), but got %zu.", size,
                       outs->size()));
    std::vector<const void*> srcs(size);
    std::vector<void*> dsts(size);
    std::vector<int64_t> sc(size), rc(size);
    std::vector<const DenseTensor*> tensors;
    for (int r = 0; r < size; ++r) {
      CheckTensor(ins[r], "input list");
      CheckSameDtype(ins[r], "input list", ins[0], "first input");
      DenseTensor& o = (*outs)[r];
      if (!o.initialized()) o.AllocateLike(ins[r].place(), ins[r].dtype(), ins[r].dims());
      CheckTensor(o, "output list");
      CheckSameDtype(o, "output list", ins[0], "first input");
      for (int q = 0; q < size; ++q) CheckNoOverlap(ins[q], o, "AllToAll (list form)");
      srcs[r] = ins[r].data();
      dsts[r] = o.data();
      sc[r] = ins[r].numel();
      rc[r] = o.numel();
      tensors.push_back(&ins[r]);
      tensors.push_back(&o);
    }
    CheckNumel(rc[GetRank()], sc[GetRank()], "output block this rank sends itself");
    DataType dt = ins[0].dtype();
    phi::Place place = ins[0].place();
    int64_t total_in = std::accumulate(sc.begin(), sc.end(), int64_t{0});
    int64_t total_out = std::accumulate(rc.begin(), rc.end(), int64_t{0});
    OpDesc d{CommType::ALLTOALL, 0, total_in, total_out, dt, -1};
    return Run(std::move(d), place, tensors,
               [=](CommContext* c, phi::Stream* s, TaskState*) {
                 ExchangeBlocks(c, s, srcs, dsts, sc, rc, dt, place);
               },
               sync_op, use_calc_stream);
  });
}

// ------------------------------------------------------------------ point to point
ProcessGroup::TaskPtr ProcessGroupWithStream::Send(const DenseTensor& tensor, int dst_rank,
                                                   int64_t offset, int64_t numel, bool sync_op,
                                                   bool use_calc_stream,
                                                   const P2POptions& opts) {
  CheckRank(dst_rank, GetSize(), "send destination rank");
  CheckPeer(dst_rank, GetRank(), opts.tag, "Send to");
  DenseTensor part = PartialView(tensor, offset, numel, "send");
  const void* src = part.data();
  int64_t n = part.numel();
  DataType dt = part.dtype();
  int tag = opts.tag;
  OpDesc d{CommType::SEND, 0, n, 0, dt, dst_rank};
  d.tag = tag;
  return Run(
      std::move(d), tensor.place(), {&tensor},
      [=](CommContext* c, phi::Stream* s, TaskState*) { c->Send(src, n, dt, dst_rank, tag, s); },
      sync_op, use_calc_stream,
      [=](CommContext* c, TaskState*, CommContext::P2PDone done) {
        c->PostSend(src, n, dt, dst_rank, tag, std::move(done));
      });
}

ProcessGroup::TaskPtr ProcessGroupWithStream::Recv(DenseTensor* tensor, int src_rank,
                                                   int64_t offset, int64_t numel, bool sync_op,
                                                   bool use_calc_stream,
                                                   const P2POptions& opts) {
  PADDLE_ENFORCE_NOT_NULL(tensor, phi::errors::InvalidArgument("The recv tensor is null."));
  if (src_rank != kAnySource) {
    CheckRank(src_rank, GetSize(), "recv source rank");
  }
  CheckPeer(src_rank, GetRank(), opts.tag, "Recv from");
  DenseTensor part = PartialView(*tensor, offset, numel, "recv");
  void* dst = part.data();
  int64_t n = part.numel();
  DataType dt = part.dtype();
  int tag = opts.tag;
  OpDesc d{CommType::RECV, 0, 0, n, dt, src_rank};
  d.tag = tag;
  return Run(std::move(d), tensor->place(), {tensor},
             [=](CommContext* c, phi::Stream* s, TaskState* st) {
               PADDLE_ENFORCE(src_rank != kAnySource || c->SupportsAnySource(),
                              phi::errors::Unimplemented(
                                  "The %s engine cannot receive from any source.",
                                  c->BackendName().c_str()));
               // The engine writes the sender when the receive completes, which inside a
               // group is at GroupEnd: the task's state lives until then, this frame not.
               st->source_rank = src_rank;
               c->Recv(dst, n, dt, src_rank == kAnySource ? CommContext::kAnyPeer : src_rank,
                       tag, s, &st->source_rank);
             },
             sync_op, use_calc_stream,
             [=](CommContext* c, TaskState* st, CommContext::P2PDone done) {
               st->source_rank = src_rank;
               c->PostRecv(dst, n, dt, src_rank == kAnySource ? CommContext::kAnyPeer : src_rank,
                           tag, &st->source_rank, std::move(done));
             });
}

ProcessGroup::TaskPtr ProcessGroupWithStream::Barrier(const BarrierOptions& opts) {
  // A one-element all-reduce: every rank must arrive before any leaves.
  phi::Place place = BarrierPlace(opts);
  DenseTensor flag(place, DataType::FLOAT32, phi::DDim({1}));
  phi::Fill(&flag, 0.0);
  void* p = flag.data();
  OpDesc d{CommType::BARRIER, 0, 1, 1, DataType::FLOAT32, -1};
  // On a CPU place with checks on, the agreement exchange (an all-gather: nobody leaves
  // before every rank contributed) is the barrier; the all-reduce is not needed.
  CommFn fn = nullptr;
  if (!AgreesInBand(place)) {
    fn = [p](CommContext* c, phi::Stream* s, TaskState*) {
      c->AllReduce(p, p, 1, DataType::FLOAT32, Reduction{}, s);
    };
  }
  // The tensor dies on return; its block stays reserved until the stream passes the op.
  return Run(std::move(d), place, {&flag}, std::move(fn), /*sync_op=*/true,
             /*use_calc_stream=*/false);
}

}  // namespace distributed
}  // namespace paddle_like
