#include "paddle_like/operators/comm_ring.h"

#include "phi/core/errors.h"

namespace paddle_like {
namespace operators {

int RegisterCommRing(const dist::GroupPtr& group, int ring_id, const std::string& device) {
  PADDLE_ENFORCE_NOT_NULL(group, phi::errors::InvalidArgument("RegisterCommRing: no group."));
  PADDLE_ENFORCE(
      group->is_member(),
      phi::errors::PreconditionNotMet("RegisterCommRing: this rank is not a member of group '%s'.",
                                      group->name().c_str()));
  const int id = ring_id < 0 ? group->gid() : ring_id;
  ProcessGroup* pg = group->backend_for(device);
  // Aliasing pointer: the map keeps the Group (which owns its backends) alive.
  distributed::ProcessGroupIdMap::GetInstance().Insert(id,
                                                       std::shared_ptr<ProcessGroup>(group, pg));
  return id;
}

void CheckArg(const ExecutionContext& ctx, bool cond, const std::string& message) {
  if (!cond) {
    PADDLE_THROW(phi::errors::InvalidArgument("%s: %s", ctx.Type().c_str(), message.c_str()));
  }
}

CommOp ResolveComm(const ExecutionContext& ctx) {
  CommOp c;
  c.ring_id = ctx.AttrOr<int>("ring_id", 0);
  c.pg = distributed::ProcessGroupIdMap::GetInstance().Get(c.ring_id);
  if (c.pg == nullptr) {
    std::string ids;
    for (int id : distributed::ProcessGroupIdMap::GetInstance().Ids()) {
      ids += (ids.empty() ? "" : ", ") + std::to_string(id);
    }
    PADDLE_THROW(phi::errors::NotFound(
        "%s: ring_id %d has no process group; the ring ids that exist are: %s.", ctx.Type().c_str(),
        c.ring_id, ids.empty() ? "none" : ids.c_str()));
  }
  c.rank = c.pg->GetRank();
  c.nranks = c.pg->GetSize();
  c.use_calc_stream = ctx.AttrOr<bool>("use_calc_stream", false);
  if (ctx.op().HasAttr("nranks")) {
    const int n = ctx.Attr<int>("nranks");
    CheckArg(ctx, n == c.nranks,
             "attribute nranks is " + std::to_string(n) + " but ring " + std::to_string(c.ring_id) +
                 " has " + std::to_string(c.nranks) + " ranks");
  }
  if (ctx.op().HasAttr("rank")) {
    const int r = ctx.Attr<int>("rank");
    CheckArg(ctx, r == c.rank,
             "attribute rank is " + std::to_string(r) + " but this process is rank " +
                 std::to_string(c.rank) + " of ring " + std::to_string(c.ring_id));
  }
  return c;
}

std::vector<std::string> OpVarNames(const ExecutionContext& ctx) {
  std::vector<std::string> vars;
  for (const auto& kv : ctx.op().Inputs())
    vars.insert(vars.end(), kv.second.begin(), kv.second.end());
  for (const auto& kv : ctx.op().Outputs())
    vars.insert(vars.end(), kv.second.begin(), kv.second.end());
  return vars;
}

void AllocateOut(const ExecutionContext& ctx, DenseTensor* out, phi::DataType dtype,
                 const phi::DDim& dims, const DenseTensor* must_not_alias) {
  if (must_not_alias != nullptr && out->Holder() != nullptr &&
      out->Holder() == must_not_alias->Holder()) {
    *out = DenseTensor();
  }
  out->AllocateLike(ctx.GetPlace(), dtype, dims);
}

}  // namespace operators
}  // namespace paddle_like
