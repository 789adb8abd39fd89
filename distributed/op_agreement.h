// In-band agreement check: before a collective runs on a CPU engine, the ranks all-gather a
// fixed-size record of what each is about to run (op, dtype, count, reduce op, root, and
// whether its local argument checks failed) and compare. On any difference every rank
// raises the same InvalidArgument, naming each rank's op, and no rank runs it: the group
// stays usable. Why in-band and on by default: Gloo aborts the process on a size mismatch
// (an exception on its I/O thread), and a rank whose checks failed would otherwise leave
// the others hanging until their timeout. The record is always the same size, so the
// check itself can never mismatch. Costs one small all-gather per collective;
// FLAGS_collective_check=off (or store) turns it off (then a size mismatch may abort in Gloo).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "distributed/stream_task.h"
#include "phi/core/distributed/comm_context.h"
#include "phi/core/distributed/store/store.h"

namespace paddle_like {
namespace distributed {

struct AgreementRecord {
  std::array<int64_t, 8> v{};
};

// `desc`'s OpSignature (op_signature.h), the part every rank must agree on, as a record.
AgreementRecord MakeAgreementRecord(const OpDesc& desc);
// One record for a coalesced group: the number of ops and a hash of their records.
AgreementRecord MakeGroupRecord(const std::vector<OpDesc>& members);
std::string DescribeRecord(const AgreementRecord& r);

// Store key under which rank `rank` publishes the reason of its failure number `serial`.
std::string LocalFailureKey(int gid, int rank, int64_t serial);

// Runs the exchange through `comm` on `stream` and raises on disagreement (on every rank).
void CheckAgreement(phi::distributed::CommContext* comm, phi::Stream* stream,
                    const AgreementRecord& mine, const std::string& group, int gid,
                    phi::distributed::Store* store);

// An all-reduce that the communicator's plan runs gathered (allreduce_plan.h: small and mid
// sizes) carries its agreement for free: the record and the payload travel in one variable
// all-gather, and every rank reduces the gathered payloads itself, in rank order, so all get
// the same bits. One exchange instead of a check plus an all-reduce. Any other size is
// checked first, then all-reduced by the communicator.
void FusedSmallAllReduce(phi::distributed::CommContext* comm, phi::Stream* stream,
                         const AgreementRecord& mine, const void* send, void* recv,
                         int64_t count, phi::DataType dtype,
                         const phi::distributed::Reduction& red, const std::string& group,
                         int gid, phi::distributed::Store* store);

}  // namespace distributed
}  // namespace paddle_like
