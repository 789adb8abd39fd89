// Surviving a dead rank: heartbeats, and the survivors' agreement on who is gone.
//
//   dist::start_heartbeat();                       // every rank, once
//   try { ... collectives on `group` ... }
//   catch (const phi::EnforceNotMet&) {
//     auto r = dist::agree_and_shrink(group);      // every survivor
//     if (!r.group) throw;                         // nobody died: a different failure
//     group = r.group;                             // the survivors, without waiting for the dead
//   }
//
// Liveness: the process's liveness service (phi/core/distributed/liveness.h), whose heartbeat
// every process of a dist world runs from init; start_heartbeat makes it beat every
// `heartbeat_interval`. A rank whose last beat is older than `heartbeat_deadline`, that said
// it exited, or that a launcher marked dead (tools/launch --elastic does, at once) is dead.
//
// Agreement (per parent group, through its store): each survivor first aborts the parent's
// communicators (so a survivor still blocked in an op with the failed ones fails too), then
// announces itself ("join/<rank>") and polls. Once every member has either joined or is
// dead, a survivor proposes {joined and alive} with compare_set on one "decision" key: the
// first proposal wins and every survivor adopts it, so all end in the same group. A rank that
// is alive but slow (its heartbeat moves) is waited for, not split off; a rank that joined and
// then died is left out if its death is seen before the decision, else the new group's first
// op fails and the survivors shrink again. A survivor that finds itself left out (declared
// dead while it was stopped) raises PreconditionNotMet.
#pragma once

#include <chrono>
#include <functional>
#include <vector>

#include "paddle_like/dist/distributed.h"

namespace paddle_like {
namespace dist {

struct ElasticOptions {
  std::chrono::milliseconds heartbeat_interval{200};
  std::chrono::milliseconds heartbeat_deadline{3000};
  // How long agree_and_shrink waits for live members to join; kUnsetTimeout: the group's
  // timeout.
  std::chrono::milliseconds join_timeout = kUnsetTimeout;
  // Tests only: runs right after this rank has announced itself.
  std::function<void()> after_join;
};

// Makes this process's heartbeat beat every options.heartbeat_interval (starting it when
// FLAGS_liveness_interval_ms turned it off; stopped at exit or by stop_heartbeat, which
// tells the others this process exited).
void start_heartbeat(const ElasticOptions& options = {});
void stop_heartbeat();

struct ShrinkResult {
  GroupPtr group;           // the survivors' group; nullptr when every member is alive
  std::vector<int> lost;    // global ranks left out
  double seconds = 0;       // from the call to the new group
};

// Called by every survivor of `group` after an op on it failed; see the header comment.
ShrinkResult agree_and_shrink(const GroupPtr& group, const ElasticOptions& options = {});

}  // namespace dist
}  // namespace paddle_like
