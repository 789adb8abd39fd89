// The hierarchical all-reduce of a Gloo group whose ranks span hosts, with two or more of them
// on at least one host (docs/architecture.md, "CPU transports"): each host's ranks reduce to
// their leader (the host's lowest group rank) over one shared-memory segment, the leaders
// all-reduce over the network on a communicator of their own, and each leader broadcasts the
// result on its host. Bytes cross the network once per host instead of once per rank.
//
// Reduction order: within a host its ranks in group-rank order (ShmGroup), then the hosts in
// their leaders' group-rank order (the leaders' all-reduce); the broadcast gives every rank the
// leader's bits, so every rank of the group ends with the same bits. AVG and PREMUL_SUM (whose
// inputs the caller already scaled) sum in every step; AVG divides once at the end.
#include <glog/logging.h>

#include <map>

#include "phi/core/distributed/gloo_comm_context_internal.h"
#include "phi/core/distributed/store/prefix_store.h"

namespace phi {
namespace distributed {

void GlooCommContext::Hierarchy::Abort(const std::string& why) {
  if (local) local->Abort(why);
  if (leaders) leaders->Abort(why);
}

void GlooCommContext::Hierarchy::SetTimeout(std::chrono::milliseconds timeout) {
  if (local) local->SetTimeout(timeout);
  if (leaders) leaders->SetTimeout(timeout);
}

std::unique_ptr<GlooCommContext::Hierarchy> GlooCommContext::MakeHierarchy(
    const std::shared_ptr<Store>& store) {
  const int n = GetSize(), me = GetRank();
  if (n < 3) return nullptr;  // two ranks on two hosts: nothing to share
  // Every rank published where it runs before its mesh address (CreateGlooCommContext), and
  // ShmGroup::Create waited for all of them: the same values on every rank.
  std::vector<std::string> keys;
  for (int r = 0; r < n; ++r) keys.push_back(ShmGroup::HostKey(r));
  const auto hosts = store->multi_get(keys);
  std::map<std::vector<uint8_t>, std::vector<int>> by_host;  // host -> its group ranks
  for (int r = 0; r < n; ++r) {
    if (hosts[r].empty() || hosts[r][0] != '1') return nullptr;  // the transport is off there
    by_host[hosts[r]].push_back(r);
  }
  if (by_host.size() < 2 || static_cast<int>(by_host.size()) == n) return nullptr;

  const std::vector<int>& mine = by_host[hosts[me]];
  std::vector<int> leaders;  // one per host, in group-rank order
  for (const auto& kv : by_host) leaders.push_back(kv.second.front());
  std::sort(leaders.begin(), leaders.end());
  const int local_rank = static_cast<int>(std::find(mine.begin(), mine.end(), me) - mine.begin());
  const int local_size = static_cast<int>(mine.size());

  auto h = std::make_unique<Hierarchy>();
  const std::string host_tag = "hier/host" + std::to_string(mine.front());
  if (local_size > 1) {
    auto local_store = std::make_shared<PrefixStore>(host_tag, store);
    local_store->set(ShmGroup::HostKey(local_rank), ShmGroup::HostValue());
    h->local = ShmGroup::Create(local_store, local_rank, local_size, exchange_->Capacity(),
                                timeout_.load(), describe() + " (this host's ranks)");
  }
  // Every host must have its segment (one may fail to make it: a full /dev/shm), or no rank
  // takes this path: the answer is agreed through the store.
  const bool ok = local_size == 1 || h->local != nullptr;
  store->set("hier/ok/" + std::to_string(me), ok ? "1" : "0");
  std::vector<std::string> ok_keys;
  for (int r = 0; r < n; ++r) ok_keys.push_back("hier/ok/" + std::to_string(r));
  store->wait(ok_keys, timeout_.load());
  for (const auto& v : store->multi_get(ok_keys)) {
    if (v.empty() || v[0] != '1') {
      VLOG(1) << describe() << ": a host could not make its shared segment: the group stays flat";
      return nullptr;
    }
  }
  if (local_rank == 0) {
    GlooOptions o = options_;
    o.timeout = timeout_.load();
    o.group_desc = options_.group_desc.empty() ? "leaders" : options_.group_desc + " leaders";
    o.liveness = false;  // its ranks are leader indices, not the group's
    const int leader_index =
        static_cast<int>(std::find(leaders.begin(), leaders.end(), me) - leaders.begin());
    h->leaders = CreateGlooCommContext(std::make_shared<PrefixStore>("hier/leaders", store),
                                       gid_, leader_index, static_cast<int>(leaders.size()), o);
  }
  VLOG(1) << describe() << ": hierarchical all-reduce over " << leaders.size()
          << " hosts (this host: " << local_size << " rank(s), local rank " << local_rank << ")";
  return h;
}

void GlooCommContext::HierAllReduce(Hierarchy* h, const void* in, void* out, int64_t count,
                                    DataType dtype, ReduceOp op) {
  const ReduceOp step_op = op == ReduceOp::AVG || op == ReduceOp::PREMUL_SUM ? ReduceOp::SUM : op;
  const size_t bytes = static_cast<size_t>(count) * SizeOf(dtype);
  try {
    if (h->local) {
      h->local->Reduce(in, out, count, dtype, step_op, /*root=*/0);
    } else if (in != out) {
      std::memcpy(out, in, bytes);
    }
    if (h->leaders) h->leaders->AllReduce(out, out, count, dtype, Reduction{step_op}, nullptr);
    if (h->local) h->local->Broadcast(out, out, bytes, /*root=*/0);
  } catch (const EnforceNotMet& e) {
    // A leader's network step failed (or a rank of this host did): the host's other ranks,
    // waiting in the broadcast, raise the same cause at once.
    h->Abort(e.what());
    throw;
  }
  if (op == ReduceOp::AVG) CpuDivide(dtype, out, count, GetSize());
}

}  // namespace distributed
}  // namespace phi
