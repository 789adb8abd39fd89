#include "phi/core/distributed/mpi_comm_context.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include <glog/logging.h>

#include "phi/core/distributed/cpu_reduce.h"
#include "phi/core/distributed/mpi_comm_context_internal.h"
#include "phi/core/distributed/store/prefix_store.h"
#include "phi/core/flags.h"

namespace phi {
namespace distributed {
namespace {

const char* ThreadLevelName(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "an unknown thread level";
  }
}

// Registered with atexit only when this library initialized MPI. Without it, OpenMPI's
// mpirun takes a rank that returns from main as one that died. Groups still alive at exit
// (statics) are destroyed after this runs: their destructors see MPI_Finalized and free
// nothing. A job still running on a comm stream at exit is the program's bug (as with
// any library torn down under a running thread).
void FinalizeAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  MpiProgress::Get().Stop();  // it polls requests: not past MPI_Finalize
  MPI_Finalize();
}

struct InitState {
  std::once_flag once;
  std::string error;  // non-empty: initialization failed, raised on every call
  bool precondition = false;  // the error is the thread level, not an MPI failure
};

InitState& Init() {
  static auto* s = new InitState();  // outlives static destructors
  return *s;
}

// A byte count from a flag (read once per communicator; every rank must set it alike).
size_t BytesFromFlag(const char* name, int64_t v) {
  PADDLE_ENFORCE(v >= 0, errors::InvalidArgument("FLAGS_%s=%lld: expected a byte count >= 0",
                                                 name, static_cast<long long>(v)));
  return static_cast<size_t>(v);
}

}  // namespace

void CheckMpi(int rc, const char* what, const std::string& where) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) {
    std::snprintf(text, sizeof(text), "MPI error code %d", rc);
  }
  PADDLE_THROW(errors::External("%s failed on %s: %s", what, where.c_str(), text));
}

void EnsureMpiInitialized() {
  InitState& s = Init();
  std::call_once(s.once, [&s] {
    int initialized = 0, provided = MPI_THREAD_SINGLE;
    MPI_Initialized(&initialized);
    if (!initialized) {
      const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
      if (rc != MPI_SUCCESS) {
        s.error = "MPI_Init_thread failed with code " + std::to_string(rc);
        return;
      }
      std::atexit(FinalizeAtExit);
      VLOG(1) << "MPI initialized by paddle_like with " << ThreadLevelName(provided);
    } else {
      MPI_Query_thread(&provided);
    }
    // Errors come back as codes (turned into typed errors) instead of ending the job.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (provided < MPI_THREAD_MULTIPLE) {
      s.precondition = true;
      s.error = std::string("the MPI backend needs MPI_THREAD_MULTIPLE (each group's comm "
                            "stream is a thread of its own), but MPI provides ") +
                ThreadLevelName(provided) +
                (initialized ? ": the program initialized MPI itself; call MPI_Init_thread "
                               "with MPI_THREAD_MULTIPLE"
                             : ": use an MPI built with thread support");
    }
  });
  if (!s.error.empty()) {
    if (s.precondition) PADDLE_THROW(errors::PreconditionNotMet("%s", s.error.c_str()));
    PADDLE_THROW(errors::External("%s", s.error.c_str()));
  }
}

int MpiWorldRank() {
  EnsureMpiInitialized();
  int r = 0;
  CheckMpi(MPI_Comm_rank(MPI_COMM_WORLD, &r), "MPI_Comm_rank", "MPI_COMM_WORLD");
  return r;
}

int MpiWorldSize() {
  EnsureMpiInitialized();
  int n = 0;
  CheckMpi(MPI_Comm_size(MPI_COMM_WORLD, &n), "MPI_Comm_size", "MPI_COMM_WORLD");
  return n;
}

std::unique_ptr<CommContext> CreateMpiCommContext(const std::shared_ptr<Store>& store, int gid,
                                                  int rank, int size,
                                                  const MpiOptions& options) {
  const std::string describe = "MPI communicator of group " + std::to_string(gid) + " (rank " +
                               std::to_string(rank) + "/" + std::to_string(size) + ")";
  const int world_rank = MpiWorldRank(), world_size = MpiWorldSize();
  PADDLE_ENFORCE(size <= world_size,
                 errors::PreconditionNotMet(
                     "%s: MPI_COMM_WORLD has %d rank(s) but the group has %d. The MPI backend "
                     "runs in a job started by mpirun (mpirun -np %d ...).",
                     describe.c_str(), world_size, size, size));
  // Which MPI ranks make up the group, in group-rank order, through the store: a member
  // that never comes is the store's Timeout naming the key, not a hang in MPI.
  auto prefixed = std::make_shared<PrefixStore>("mpi/" + std::to_string(gid), store);
  const std::string mine = std::to_string(world_rank);
  prefixed->set("world_rank/" + std::to_string(rank),
                std::vector<uint8_t>(mine.begin(), mine.end()));
  std::vector<int> members(static_cast<size_t>(size));
  std::set<int> seen;
  for (int r = 0; r < size; ++r) {
    auto v = prefixed->get("world_rank/" + std::to_string(r));
    members[r] = std::atoi(std::string(v.begin(), v.end()).c_str());
    PADDLE_ENFORCE(seen.insert(members[r]).second,
                   errors::PreconditionNotMet(
                       "%s: two members are MPI rank %d. Every rank of an MPI group must be a "
                       "process of one mpirun job.",
                       describe.c_str(), members[r]));
  }
  MPI_Group world_group = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
  MPI_Comm comm = MPI_COMM_NULL;
  CheckMpi(MPI_Comm_group(MPI_COMM_WORLD, &world_group), "MPI_Comm_group", describe);
  int rc = MPI_Group_incl(world_group, size, members.data(), &group);
  if (rc == MPI_SUCCESS) {
    // Collective over the members only; the tag keeps concurrent creations apart.
    rc = MPI_Comm_create_group(MPI_COMM_WORLD, group, gid, &comm);
  }
  MPI_Group_free(&world_group);
  if (group != MPI_GROUP_NULL) MPI_Group_free(&group);
  CheckMpi(rc, "MPI_Comm_create_group", describe);
  return std::make_unique<MpiCommContext>(comm, rank, size, options.timeout, describe);
}

// ------------------------------------------------------------------ MpiCommContext
MpiCommContext::MpiCommContext(MPI_Comm comm, int rank, int size,
                               std::chrono::milliseconds timeout, std::string name)
    : CpuCommContext(rank, size, "MPI", std::move(name)), comm_(comm), timeout_(timeout) {
  CheckMpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler",
           describe());
  int* ub = nullptr;
  int flag = 0;
  if (MPI_Comm_get_attr(comm_, MPI_TAG_UB, &ub, &flag) == MPI_SUCCESS && flag && ub) {
    tag_ub_ = *ub;
  }
  segment_bytes_ =
      BytesFromFlag("mpi_allreduce_segment_bytes", FLAGS_mpi_allreduce_segment_bytes);
  segment_above_bytes_ =
      BytesFromFlag("mpi_allreduce_segment_above", FLAGS_mpi_allreduce_segment_above);
  int my_rank = -1;
  CheckMpi(MPI_Comm_rank(comm_, &my_rank), "MPI_Comm_rank", describe());
  PADDLE_ENFORCE(my_rank == rank, errors::External("%s: MPI gave this process rank %d.",
                                                   describe().c_str(), my_rank));
}

MpiCommContext::~MpiCommContext() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  // After MPI_Finalize (a group destroyed at static destruction) there is nothing to free.
  if (finalized) return;
  MpiProgress::Get().Drop(this, "the communicator was destroyed");
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiCommContext::Call(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  try {
    CheckMpi(rc, what, describe());
  } catch (const EnforceNotMet& e) {
    MarkBroken(e.what());
    throw;
  }
}

bool MpiCommContext::AllReducePrepared(const void* send, void* recv, int64_t count,
                                       DataType dtype, ReduceOp op) {
  MpiReduction m = MpiReductionFor(dtype, op);
  const size_t es = SizeOf(dtype);
  const bool in_place = send == recv;
  // Large buffers in segments (see segment_bytes_): the same split on every rank, since it
  // depends only on the count and the environment.
  int64_t seg = count;
  if (segment_bytes_ > 0 && static_cast<size_t>(count) * es > segment_above_bytes_) {
    seg = std::max<int64_t>(1, static_cast<int64_t>(segment_bytes_ / es));
  }
  for (int64_t off = 0; off < count; off += seg) {
    const int n = MpiCount(std::min(seg, count - off), "allreduce");
    char* out = static_cast<char*>(recv) + static_cast<size_t>(off) * es;
    const void* in =
        in_place ? MPI_IN_PLACE : static_cast<const char*>(send) + static_cast<size_t>(off) * es;
    Call(MPI_Allreduce(in, out, n, m.type, m.op, comm_), "MPI_Allreduce");
  }
  return false;  // AVG: CpuCommContext divides
}

void MpiCommContext::Broadcast(const void* send, void* recv, int64_t count, DataType dtype,
                               int root, Stream*) {
  ThrowIfBroken();
  if (count == 0) return;
  if (GetRank() == root && send != recv) {
    std::memcpy(recv, send, static_cast<size_t>(count) * SizeOf(dtype));
  }
  MpiBuffer b = MpiMoveBuffer(dtype, count);
  Call(MPI_Bcast(recv, b.count, b.type, root, comm_), "MPI_Bcast");
}

void MpiCommContext::Reduce(const void* send, void* recv, int64_t count, DataType dtype,
                            const Reduction& red, int root, Stream*) {
  ThrowIfBroken();
  if (count == 0) return;
  PreparedReduction p = PrepareReduction(send, count, dtype, red);
  MpiReduction m = MpiReductionFor(p.in.dtype, p.op);
  const bool is_root = GetRank() == root;
  // The contract writes `recv` on the root only: MPI ignores the receive buffer elsewhere.
  const void* in = is_root && p.in.data == recv ? MPI_IN_PLACE : p.in.data;
  Call(MPI_Reduce(in, is_root ? recv : nullptr, MpiCount(p.in.count, "reduce"), m.type, m.op,
                  root, comm_),
       "MPI_Reduce");
  if (is_root) FinishReduction(red, p.in.dtype, recv, p.in.count);
}

void MpiCommContext::AllGather(const void* send, void* recv, int64_t send_count,
                               DataType dtype, Stream*) {
  ThrowIfBroken();
  if (send_count == 0) return;
  MpiBuffer b = MpiMoveBuffer(dtype, send_count);
  MpiCount(send_count * GetSize(), "allgather output");
  const bool in_place = static_cast<const char*>(recv) +
                            static_cast<size_t>(GetRank()) * send_count * SizeOf(dtype) ==
                        send;
  Call(MPI_Allgather(in_place ? MPI_IN_PLACE : send, b.count, b.type, recv, b.count, b.type,
                     comm_),
       "MPI_Allgather");
}

const char* MpiCommContext::VariableAllGather(const void* send, size_t bytes, size_t* stride,
                                              std::vector<size_t>* lengths, Stream*) {
  ThrowIfBroken();
  PADDLE_ENFORCE(bytes <= VariableGatherCapacity(),
                 errors::InvalidArgument("MPI variable all-gather: %zu bytes exceed its capacity "
                                         "of %zu",
                                         bytes, VariableGatherCapacity()));
  const int n = GetSize();
  exchange_send_.assign(kExchangeSlot, 0);
  exchange_all_.resize(kExchangeSlot * static_cast<size_t>(n));
  const uint64_t len = bytes;
  std::memcpy(exchange_send_.data(), &len, sizeof(len));
  if (bytes > 0) std::memcpy(exchange_send_.data() + sizeof(len), send, bytes);
  Call(MPI_Allgather(exchange_send_.data(), static_cast<int>(kExchangeSlot), MPI_BYTE,
                     exchange_all_.data(), static_cast<int>(kExchangeSlot), MPI_BYTE, comm_),
       "MPI_Allgather");
  lengths->resize(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    uint64_t l = 0;
    std::memcpy(&l, exchange_all_.data() + static_cast<size_t>(r) * kExchangeSlot, sizeof(l));
    (*lengths)[static_cast<size_t>(r)] =
        static_cast<size_t>(std::min<uint64_t>(l, kExchangeSlot - sizeof(len)));
  }
  *stride = kExchangeSlot;
  return exchange_all_.data() + sizeof(len);
}

namespace {
// FLAGS_mpi_native_collectives (flags.h), read once per process.
bool NativeCollectives() {
  static const bool native = FLAGS_mpi_native_collectives;
  return native;
}
}  // namespace

bool MpiCommContext::HasNativeGatherScatter() { return NativeCollectives(); }

// Block counts agree on every rank: the agreement check compared them before the job ran.
void MpiCommContext::Gather(const void* send, void* recv, int64_t count, DataType dtype,
                            int root, Stream*) {
  ThrowIfBroken();
  const MpiBuffer b = MpiMoveBuffer(dtype, count);
  const bool is_root = GetRank() == root;
  const size_t bytes = static_cast<size_t>(count) * SizeOf(dtype);
  // The root's own block already in place: MPI wants MPI_IN_PLACE for that, not an alias.
  const bool in_place = is_root && static_cast<const char*>(recv) + root * bytes == send;
  Call(MPI_Gather(in_place ? MPI_IN_PLACE : send, b.count, b.type, is_root ? recv : nullptr,
                  b.count, b.type, root, comm_),
       "MPI_Gather");
}

void MpiCommContext::Scatter(const void* send, void* recv, int64_t count, DataType dtype,
                             int root, Stream*) {
  ThrowIfBroken();
  const MpiBuffer b = MpiMoveBuffer(dtype, count);
  const bool is_root = GetRank() == root;
  const size_t bytes = static_cast<size_t>(count) * SizeOf(dtype);
  const bool in_place = is_root && static_cast<const char*>(send) + root * bytes == recv;
  Call(MPI_Scatter(is_root ? send : nullptr, b.count, b.type, in_place ? MPI_IN_PLACE : recv,
                   b.count, b.type, root, comm_),
       "MPI_Scatter");
}

bool MpiCommContext::AllToAllV(const void* send, const std::vector<int64_t>& send_counts,
                               const std::vector<int64_t>& send_offsets, void* recv,
                               const std::vector<int64_t>& recv_counts,
                               const std::vector<int64_t>& recv_offsets, DataType dtype,
                               Stream*) {
  if (!NativeCollectives()) return false;
  ThrowIfBroken();
  const int n = GetSize(), me = GetRank();
  std::vector<int64_t> theirs(static_cast<size_t>(n));
  Call(MPI_Alltoall(send_counts.data(), 1, MPI_INT64_T, theirs.data(), 1, MPI_INT64_T, comm_),
       "MPI_Alltoall (all-to-all counts)");
  std::string mismatch;
  for (int r = 0; r < n; ++r) {
    if (theirs[r] == recv_counts[r]) continue;
    mismatch += "\n  rank " + std::to_string(r) + " sends " + std::to_string(theirs[r]) +
                " elements to rank " + std::to_string(me) + ", which expects " +
                std::to_string(recv_counts[r]);
  }
  int ok = mismatch.empty() ? 1 : 0, all_ok = 0;
  Call(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm_), "MPI_Allreduce (all-to-all check)");
  PADDLE_ENFORCE(all_ok == 1,
                 errors::InvalidArgument("AllToAll: the ranks' split sizes disagree; nothing "
                                         "was sent.%s",
                                         mismatch.empty() ? "\n  (the disagreement is on another "
                                                            "rank; its error names it)"
                                                          : mismatch.c_str()));
  const MpiBuffer unit = MpiMoveBuffer(dtype, 1);
  const int64_t scale = IsComplex(dtype) ? 2 : 1;  // complex moves as its real view
  std::vector<int> sc(static_cast<size_t>(n)), sd(sc), rc(sc), rd(sc);
  for (int r = 0; r < n; ++r) {
    sc[r] = MpiCount(send_counts[r] * scale, "alltoall send count");
    sd[r] = MpiCount(send_offsets[r] * scale, "alltoall send offset");
    rc[r] = MpiCount(recv_counts[r] * scale, "alltoall receive count");
    rd[r] = MpiCount(recv_offsets[r] * scale, "alltoall receive offset");
  }
  Call(MPI_Alltoallv(send, sc.data(), sd.data(), unit.type, recv, rc.data(), rd.data(),
                     unit.type, comm_),
       "MPI_Alltoallv");
  return true;
}

void MpiCommContext::ReduceScatter(const void* send, void* recv, int64_t recv_count,
                                   DataType dtype, const Reduction& red, Stream*) {
  ThrowIfBroken();
  if (recv_count == 0) return;
  const int n = GetSize();
  PreparedReduction p = PrepareReduction(send, recv_count * n, dtype, red);
  MpiReduction m = MpiReductionFor(p.in.dtype, p.op);
  const int64_t block = p.in.count / n;
  MpiCount(p.in.count, "reducescatter input");
  // In place, MPI reads the whole input from `recv`.
  Call(MPI_Reduce_scatter_block(p.in.data == recv ? MPI_IN_PLACE : p.in.data, recv,
                                MpiCount(block, "reducescatter"), m.type, m.op, comm_),
       "MPI_Reduce_scatter_block");
  FinishReduction(red, p.in.dtype, recv, block);
}

}  // namespace distributed
}  // namespace phi
