#include "distributed/op_agreement.h"

#include "distributed/op_signature.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

#include "phi/core/distributed/cpu_reduce.h"
#include "phi/core/errors.h"
#include "phi/core/distributed/rank_list.h"

namespace paddle_like {
namespace distributed {
namespace {

constexpr int64_t kRecordMagic = 0x504c4147;  // "PLAG", version 1
enum Field { kMagic = 0, kType, kDtype, kCount, kReduceOp, kRoot, kFailed, kExtra };

}  // namespace

AgreementRecord MakeAgreementRecord(const OpDesc& d) {
  const OpSignature sig = OpSignature::Of(d);
  AgreementRecord r;
  r.v[kMagic] = kRecordMagic;
  r.v[kType] = static_cast<int64_t>(sig.type);
  r.v[kDtype] = static_cast<int64_t>(sig.dtype);
  r.v[kCount] = sig.count;
  r.v[kReduceOp] = sig.reduce_op;
  r.v[kRoot] = sig.root;
  r.v[kFailed] = d.local_failure ? 1 : 0;
  r.v[kExtra] = d.local_failure ? d.failure_serial : 0;
  return r;
}

AgreementRecord MakeGroupRecord(const std::vector<OpDesc>& members) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the members' records
  for (const OpDesc& d : members) {
    if (!OpSignature::IsComparedAcrossRanks(d)) {
      continue;  // P2P members differ per rank; their sizes are checked per pair
    }
    for (int64_t x : MakeAgreementRecord(d).v) {
      h = (h ^ static_cast<uint64_t>(x)) * 1099511628211ull;
    }
  }
  AgreementRecord r;
  r.v[kMagic] = kRecordMagic;
  r.v[kType] = static_cast<int64_t>(CommType::COALESCED);
  r.v[kCount] = -1;
  r.v[kReduceOp] = -1;
  r.v[kRoot] = -1;
  r.v[kExtra] = static_cast<int64_t>(h);
  return r;
}

std::string DescribeRecord(const AgreementRecord& r) {
  if (r.v[kMagic] != kRecordMagic) return "an unreadable record";
  const auto type = static_cast<CommType>(r.v[kType]);
  std::string s = CommTypeToString(type);
  if (type == CommType::COALESCED) {
    return s + " group (ops hash " + std::to_string(static_cast<uint64_t>(r.v[kExtra]) % 1000000) +
           ")";
  }
  OpSignature sig;
  sig.type = type;
  sig.dtype = static_cast<phi::DataType>(r.v[kDtype]);
  sig.count = r.v[kCount];
  sig.reduce_op = static_cast<int>(r.v[kReduceOp]);
  sig.root = static_cast<int>(r.v[kRoot]);
  return sig.ToString();
}

std::string LocalFailureKey(int gid, int rank, int64_t serial) {
  return "opcheck/" + std::to_string(gid) + "/" + std::to_string(rank) + "/" +
         std::to_string(serial);
}

namespace {
// Raises on every rank when the records differ: every rank holds the same records, so all
// raise the same error.
void EvaluateRecords(const std::vector<AgreementRecord>& recs, int my_rank,
                     const std::string& group, int gid, phi::distributed::Store* store) {
  const int size = static_cast<int>(recs.size());
  // Ranks whose own checks failed: their reasons are in the store.
  std::string failed;
  for (int r = 0; r < size; ++r) {
    if (recs[r].v[kFailed] == 0) continue;
    std::string reason = "(its reason was not published)";
    try {
      std::string key = LocalFailureKey(gid, r, recs[r].v[kExtra]);
      if (store != nullptr) {
        store->wait({key}, std::chrono::seconds(5));
        reason = store->get_string(key);
      }
    } catch (const std::exception&) {
    }
    failed += "\n  rank " + std::to_string(r) + ": " + reason;
  }
  if (!failed.empty()) {
    PADDLE_THROW(phi::errors::InvalidArgument(
        "%s: %s was not run on any rank, because its argument checks failed on:%s",
        group.c_str(), CommTypeToString(static_cast<CommType>(recs[my_rank].v[kType])),
        failed.c_str()));
  }
  // The common case, allocation-free: every rank runs what this one does.
  if (std::all_of(recs.begin(), recs.end(),
                  [&](const AgreementRecord& r) { return r.v == recs[my_rank].v; })) {
    return;
  }
  // Group the ranks by what they run.
  std::map<std::array<int64_t, 8>, std::vector<int>> by_record;
  for (int r = 0; r < size; ++r) by_record[recs[r].v].push_back(r);
  if (by_record.size() == 1) return;
  std::string detail;
  for (const auto& kv : by_record) {
    AgreementRecord rec;
    rec.v = kv.first;
    detail += "\n  rank(s) " + phi::distributed::JoinRanks(kv.second) + " run " +
              DescribeRecord(rec);
  }
  PADDLE_THROW(phi::errors::InvalidArgument(
      "%s: Detected mismatch between collectives on ranks; no rank ran it:%s", group.c_str(),
      detail.c_str()));
}

// The record on the wire: 32 bytes instead of the 64 of its eight words, so that a small
// all-reduce's record and payload share one cache line in a shared-memory exchange.
struct WireRecord {
  uint32_t magic;
  uint8_t type, dtype;
  int8_t reduce_op;
  uint8_t failed;
  int32_t root;
  uint32_t reserved;
  int64_t count, extra;
};
static_assert(sizeof(WireRecord) == 32, "the record's wire size is fixed");
constexpr uint32_t kWireMagic = 0x32414c50;  // "PLA2": version 2, the packed record
constexpr size_t kRecordBytes = sizeof(WireRecord);

void PackRecord(const AgreementRecord& r, char* out) {
  WireRecord w{};
  w.magic = kWireMagic;
  w.type = static_cast<uint8_t>(r.v[kType]);
  w.dtype = static_cast<uint8_t>(r.v[kDtype]);
  w.reduce_op = static_cast<int8_t>(r.v[kReduceOp]);
  w.failed = static_cast<uint8_t>(r.v[kFailed]);
  w.root = static_cast<int32_t>(r.v[kRoot]);
  w.count = r.v[kCount];
  w.extra = r.v[kExtra];
  std::memcpy(out, &w, sizeof(w));
}

// A block shorter than a record, or without the magic, reads as an unreadable record.
void UnpackRecord(const char* in, size_t length, AgreementRecord* r) {
  r->v.fill(0);
  WireRecord w{};
  if (length < sizeof(w)) return;
  std::memcpy(&w, in, sizeof(w));
  if (w.magic != kWireMagic) return;
  r->v[kMagic] = kRecordMagic;
  r->v[kType] = w.type;
  r->v[kDtype] = w.dtype;
  r->v[kReduceOp] = w.reduce_op;
  r->v[kFailed] = w.failed;
  r->v[kRoot] = w.root;
  r->v[kCount] = w.count;
  r->v[kExtra] = w.extra;
}

// Whether a payload of `bytes` can travel with the record: within the communicator's variable
// all-gather (the fixed-size exchange carries the record alone).
bool FitsExchange(phi::distributed::CommContext* comm, size_t bytes) {
  const size_t cap = comm->VariableGatherCapacity();
  return cap > 0 ? kRecordBytes + bytes <= cap : bytes == 0;
}

// Every rank's record, and after it the payload a fused all-reduce sends along.
struct Gathered {
  const char* base = nullptr;  // rank r's record at base + r * stride, its payload after it
  size_t stride = 0;
  // Every rank sent this rank's record, byte for byte, and none of them failed its checks:
  // nothing to evaluate (`recs` is then left empty: the common case unpacks nothing).
  bool agreed = false;
  std::vector<AgreementRecord> recs;
  std::vector<char> send;     // this rank's record and payload
  std::vector<char> fixed;    // the fixed-size exchange's output
  std::vector<size_t> lengths;
};

// One exchange. Through the communicator's variable all-gather where it has one (exactly the
// bytes each rank has), else an all-gather of the records alone, so that two ranks running
// different ops still exchange equal sizes. The result lives in this thread's scratch (a
// small sync all-reduce is mostly bookkeeping: it allocates nothing here), valid until the
// thread's next exchange.
const Gathered& Exchange(phi::distributed::CommContext* comm, phi::Stream* stream,
                         const AgreementRecord& mine, const void* payload,
                         size_t payload_bytes) {
  thread_local Gathered g;
  const int size = comm->GetSize();
  // Every check of a communicator takes the same path, whatever the op: a rank running a
  // different op must still meet the others in the same exchange.
  const bool variable = comm->VariableGatherCapacity() > 0;
  const size_t slot = kRecordBytes + payload_bytes;
  PADDLE_ENFORCE(FitsExchange(comm, payload_bytes),
                 phi::errors::PreconditionNotMet("a fused payload of %zu bytes does not fit",
                                                   payload_bytes));
  g.send.resize(slot);
  PackRecord(mine, g.send.data());
  if (payload_bytes > 0) std::memcpy(g.send.data() + kRecordBytes, payload, payload_bytes);
  if (variable) {
    g.base = comm->VariableAllGather(g.send.data(), slot, &g.stride, &g.lengths, stream);
  } else {
    g.fixed.resize(slot * static_cast<size_t>(size));
    comm->AllGather(g.send.data(), g.fixed.data(), static_cast<int64_t>(slot),
                    phi::DataType::UINT8, stream);
    g.base = g.fixed.data();
    g.stride = slot;
    g.lengths.assign(static_cast<size_t>(size), slot);
  }
  g.agreed = !mine.v[kFailed];
  for (int r = 0; r < size && g.agreed; ++r) {
    g.agreed = g.lengths[static_cast<size_t>(r)] == slot &&
               std::memcmp(g.base + static_cast<size_t>(r) * g.stride, g.send.data(),
                           kRecordBytes) == 0;
  }
  if (g.agreed) {
    g.recs.clear();
    return g;
  }
  g.recs.resize(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    UnpackRecord(g.base + static_cast<size_t>(r) * g.stride, g.lengths[static_cast<size_t>(r)],
                 &g.recs[r]);
  }
  return g;
}
}  // namespace

void CheckAgreement(phi::distributed::CommContext* comm, phi::Stream* stream,
                    const AgreementRecord& mine, const std::string& group, int gid,
                    phi::distributed::Store* store) {
  if (comm->GetSize() == 1 && !mine.v[kFailed]) return;
  const Gathered& g = Exchange(comm, stream, mine, nullptr, 0);
  if (!g.agreed) EvaluateRecords(g.recs, comm->GetRank(), group, gid, store);
}

void FusedSmallAllReduce(phi::distributed::CommContext* comm, phi::Stream* stream,
                         const AgreementRecord& mine, const void* send, void* recv,
                         int64_t count, phi::DataType dtype,
                         const phi::distributed::Reduction& red, const std::string& group,
                         int gid, phi::distributed::Store* store) {
  using namespace phi::distributed;  // NOLINT: the host reduction kernels
  CpuReduceInput in = PrepareCpuReduce(send, count, dtype, red);
  const size_t bytes = static_cast<size_t>(in.count) * phi::SizeOf(in.dtype);
  if (comm->PlanAllReduce(bytes) != phi::distributed::AllReduceAlgorithm::kGathered ||
      !FitsExchange(comm, bytes)) {
    // The communicator runs another algorithm for this size: check, then its op.
    CheckAgreement(comm, stream, mine, group, gid, store);
    comm->AllReduce(send, recv, count, dtype, red, stream);
    return;
  }
  const int size = comm->GetSize();
  const Gathered& g = Exchange(comm, stream, mine, in.data, bytes);
  if (!g.agreed) EvaluateRecords(g.recs, comm->GetRank(), group, gid, store);
  if (bytes == 0) return;
  // Every rank reduces the same payloads in rank order: the same bits everywhere.
  CpuAllReduceGathered(in.dtype, red.op, g.base + kRecordBytes, g.stride, size, in.count, recv);
}

}  // namespace distributed
}  // namespace paddle_like
