// paddle_like::dist: the torch.distributed-style API that model code and framework glue call
// (init and world, groups, the tensor collectives, Work). Names are
// the seed's (snake_case); Python's keyword arguments are option structs with defaults.
//
//   dist::init_process_group({.backend = "gloo"});          // env:// by default
//   auto work = dist::all_reduce(&grad, dist::ReduceOp::AVG, {.async_op = true});
//   work->wait();                                            // the group's timeout
//
// Conventions (as torch.distributed):
//  - `src`/`dst`/`peer` arguments are GLOBAL ranks (of the world group), or group ranks
//    written GroupRank{r} (the seed's group_src/group_dst/group_peer); a rank outside the
//    group is an InvalidArgumentError. split_group and shrink_group take PARENT-group
//    ranks, as the seed does.
//  - Every rank calls new_group() for every group, in the same order (also the ranks that
//    are not in it): group ids are agreed by that order and never collide. A rank outside
//    the group gets a Group whose is_member() is false; a collective on it does nothing and
//    returns a null Work (warned once).
//  - A backend is a name ("gloo", "nccl") or a config "cpu:gloo,cuda:nccl": a group holds
//    one process group per device type, created when first used, and each call goes to the
//    backend of its tensors' place.
//  - Tensors must be contiguous (a strided view is an InvalidArgumentError naming it).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "distributed/backend_registry.h"
#include "distributed/process_group.h"
#include "phi/core/dense_tensor.h"
#include "phi/core/distributed/store/store.h"

namespace paddle_like {
namespace dist {

using phi::DenseTensor;
using ReduceOp = phi::distributed::ReduceOp;
using Store = phi::distributed::Store;
constexpr std::chrono::milliseconds kUnsetTimeout = distributed::ProcessGroup::kUnsetTimeout;

// ------------------------------------------------------------------ Work
class Work;
class Group;
// Completion of a Work, for callbacks (DataParallel comm hooks): then(cb) runs cb(work) once
// the op has ended (successfully or not: see work.exception()) and returns a Future that ends
// when cb has run. wait() on a Work's own future rethrows the op's error; on a then() future,
// the callback's (a callback that rethrows work.exception() passes the op's error on).
// Where callbacks run: in the first wait() on the future (or on one chained after it) that
// finds the op ended, else on the process's one future-completion thread, which picks up the
// callbacks nobody waits for soon after their op ends. No thread per future.
struct FutureState;
class Future {
 public:
  explicit Future(std::shared_ptr<FutureState> state);
  std::shared_ptr<Future> then(std::function<void(Work&)> callback);
  // Blocks until the op (and, for a then() future, its callback) has ended; rethrows the
  // op's error (a then() future: the callback's exception).
  void wait();
  // Whether wait() would return (or raise) at once.
  bool done() const;

 private:
  std::shared_ptr<FutureState> state_;
};

// The handle of an issued op.
//  - wait() waits up to the group's timeout and returns true, or raises: the op's error, or a
//    TimeoutError naming group, op and sequence number when the timeout runs out.
//  - wait(timeout) returns false when the op has not ended within `timeout` and leaves it
//    running (wait again, or abort()); true once it has; the op's error is raised, never
//    returned as false. (The seed returns its backend's bool; torch raises on error too.)
class Work : public std::enable_shared_from_this<Work> {
 public:
  // `results`: the op's output tensors (they share storage with the caller's).
  // `group`: the group the op runs on (its timeout is wait()'s default).
  // `on_done`: runs once, in the first wait() that sees the op succeed (the copy-out of ops
  // that stage their outputs, as the seed's list all_gather does).
  Work(distributed::ProcessGroup::TaskPtr task, std::shared_ptr<Group> group,
       std::vector<DenseTensor> results = {}, std::function<void()> on_done = nullptr);
  bool wait(std::chrono::milliseconds timeout = kUnsetTimeout);
  bool is_completed();
  // Completed without an error (false while running).
  bool is_success();
  // The op's error, or nullptr.
  std::exception_ptr exception();
  int source_rank() const;  // the sender of a receive from any source, after wait()
  std::shared_ptr<Future> get_future();
  // Ends this op as an error now and aborts its group's communicator (every later op on the
  // group raises at once; destroy the group and make a new one). wait() then raises.
  void abort();
  // The op's output tensors (read them after wait()).
  const std::vector<DenseTensor>& result() const { return results_; }

 private:
  distributed::ProcessGroup::TaskPtr task_;
  std::chrono::milliseconds timeout_;
  std::vector<DenseTensor> results_;
  std::shared_ptr<Group> group_;
  std::exception_ptr error_;
  std::function<void()> on_done_;
  std::mutex done_mu_;     // on_done_ runs once; a throw leaves it to the next wait()
  bool done_ran_ = false;
};
using WorkPtr = std::shared_ptr<Work>;

// Names the ops this thread issues while it lives: the name is in the flight recorder and in
// every error about them. `dist::record_comm scope("grad bucket 3");`
using record_comm = distributed::CommNameScope;

// ------------------------------------------------------------------ groups
class Group {
 public:
  const std::string& name() const { return name_; }
  int gid() const { return gid_; }
  // Global ranks of the members, in group-rank order.
  const std::vector<int>& ranks() const { return ranks_; }
  bool is_member() const { return rank_ >= 0; }
  int rank() const { return rank_; }  // this process's group rank; -1 when not a member
  int size() const { return static_cast<int>(ranks_.size()); }
  const std::string& backend_config() const { return backend_config_; }
  const std::string& group_desc() const { return group_desc_; }
  const std::shared_ptr<const distributed::ProcessGroupOptions>& pg_options() const {
    return pg_options_;
  }
  std::chrono::milliseconds timeout() const { return timeout_.load(); }
  // The timeout of later waits, later ops and the backends' communicators (those that
  // exist included: their calls, connections and watchdog from the next op on).
  void set_timeout(std::chrono::milliseconds t);
  const std::map<std::string, std::string>& backend_by_device() const {
    return backend_by_device_;
  }
  // The group's own namespace in the store (what its backends and monitored barriers use).
  const std::shared_ptr<Store>& store() const { return store_; }
  // The serial of the next monitored_barrier on this group (every member counts alike).
  int NextMonitoredBarrier() { return ++monitored_barriers_; }
  // Destroys this group's backends (shrink_group's abort); later calls make new ones.
  void drop_backends();
  // destroy_process_group: releases the backends now and makes every later use of this
  // handle a PreconditionNotMet naming the group.
  void destroy();
  bool destroyed() const { return destroyed_.load(); }
  // Aborts the communicators of the backends made so far (Work::abort).
  void abort_backends(const std::string& why);
  // The process group serving `device` ("cpu", "cuda"), created on first use. Raises
  // InvalidArgument when the group's backend config has none for it.
  distributed::ProcessGroup* backend_for(const std::string& device);

 private:
  friend class World;
  Group(std::string name, int gid, std::vector<int> ranks, int rank, std::string config,
        std::map<std::string, std::string> by_device, std::shared_ptr<Store> store,
        std::chrono::milliseconds timeout);
  std::string name_;
  int gid_;
  std::vector<int> ranks_;
  int rank_;
  std::string backend_config_;
  std::map<std::string, std::string> backend_by_device_;  // "cpu" -> "gloo"
  std::string group_desc_;
  std::shared_ptr<const distributed::ProcessGroupOptions> pg_options_;
  std::shared_ptr<Store> store_;                          // the group's (prefixed) store
  std::atomic<std::chrono::milliseconds> timeout_;
  int device_id_ = -1;  // device backends run on it (-1: chosen from the rank)
  std::atomic<int> monitored_barriers_{0};
  std::atomic<bool> destroyed_{false};
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<distributed::ProcessGroup>> backends_;
};
using GroupPtr = std::shared_ptr<Group>;

// ------------------------------------------------------------------ init and world
struct InitOptions {
  std::string backend;                  // empty: "cpu:gloo,cuda:nccl" where NCCL is built
  std::string init_method = "env://";   // env://, tcp://host:port, file:///path
  std::shared_ptr<Store> store;         // instead of init_method
  int world_size = -1;
  int rank = -1;
  // The group's timeout (FLAGS_default_group_timeout_s when unset); it also bounds the
  // rendezvous (init_method's store connecting and every rank registering).
  std::chrono::milliseconds timeout = kUnsetTimeout;
  std::string group_name;               // default "default_pg"
  int device_id = -1;  // the device of device backends (NCCL); -1: chosen from the rank
};
void init_process_group(const InitOptions& options = {});
bool is_initialized();
// One group (not the world: that is destroy_process_group()), or everything. The groups'
// communicators, threads and sockets are released now, even while other handles to them
// live; a later call on such a handle is a PreconditionNotMet naming the group.
void destroy_process_group(const GroupPtr& group = nullptr);
GroupPtr world();  // PreconditionNotMet before init
// A group this rank is not in: InvalidArgument (the seed's "Invalid process group": its
// non-member handle is GroupMember.NON_GROUP_MEMBER, which no call accepts).
int get_rank(const GroupPtr& group = nullptr);
int get_world_size(const GroupPtr& group = nullptr);
std::string get_backend(const GroupPtr& group = nullptr);
// The device -> backend map of a group, as "cpu:gloo,cuda:nccl".
std::string get_backend_config(const GroupPtr& group = nullptr);
// The timeout of `group` (null: the world) from now on: later waits, later ops, and the
// communicators of its backends, those that exist included (an op already issued keeps its
// own). Not positive: InvalidArgument.
void set_timeout(std::chrono::milliseconds timeout, const GroupPtr& group = nullptr);
// The backend of `device` in the default config of this build ("gloo" for "cpu").
std::string get_default_backend_for_device(const std::string& device);
bool is_available();
bool is_gloo_available();
bool is_nccl_available();
bool is_mpi_available();
bool is_backend_available(const std::string& backend);

struct NewGroupOptions {
  std::chrono::milliseconds timeout = kUnsetTimeout;  // the world's
  std::string backend;                                // the world's
  // Only the members call new_group (in the same order among themselves); they agree on
  // the group id through the store. A non-member calling it: InvalidArgument.
  bool use_local_synchronization = false;
  // The group ranks follow the global ranks' order (true, the seed's default) or the order
  // given (split_group keeps it: its group rank 0 is the first rank listed).
  bool sort_ranks = true;
  // The backend's options (the seed's pg_options: distributed/process_group_options.h), for
  // one of the group's backends (else InvalidArgument); null: the defaults.
  std::shared_ptr<const distributed::ProcessGroupOptions> pg_options;
  // Describes the group in every message about it and in its flight-recorder dump.
  std::string group_desc;
};
// `ranks`: global ranks (empty: all). Duplicates or out-of-range ranks: InvalidArgument.
GroupPtr new_group(std::vector<int> ranks = {}, const NewGroupOptions& options = {});
struct ShrinkOptions {
  // Destroy the parent's backends first (their pending ops end as errors within the
  // timeout): the way out of a group whose member died mid-op.
  bool abort = false;
  std::chrono::milliseconds timeout = kUnsetTimeout;  // the parent's
  std::shared_ptr<const distributed::ProcessGroupOptions> pg_options;  // as new_group's
};
// A group of the parent's ranks minus `ranks_to_exclude` (PARENT-group ranks, as the seed).
// Only the ranks that stay call it, in the same order; it never contacts an excluded rank
// (survivors meet through the store), so it works when they are dead. An empty list, the
// caller being excluded, a rank outside [0, parent size), or excluding every rank:
// InvalidArgument. With `abort` the parent's communicators are aborted first, so an op
// stuck on a dead rank ends at once. Shrinking the world replaces
// it, and its ranks are renumbered 0..n-1 in their old order (get_rank() changes; groups
// made before keep the old numbering and should be made again).
GroupPtr shrink_group(const std::vector<int>& ranks_to_exclude, const GroupPtr& group = nullptr,
                      const ShrinkOptions& options = {});
int get_group_rank(const GroupPtr& group, int global_rank);  // -1 when not in it
int get_global_rank(const GroupPtr& group, int group_rank);
std::vector<int> get_process_group_ranks(const GroupPtr& group);

// ------------------------------------------------------------------ rank arguments
// A src / dst / peer argument. A plain int is a GLOBAL rank (torch.distributed's `src`); a
// GroupRank{r} is rank r of the call's group (the seed's `group_src`, `group_dst`,
// `group_peer`). A C++ call takes exactly one of the two by construction, so the seed's
// "both given" / "neither given" errors cannot arise here. A global rank outside the group
// or a group rank outside [0, size): InvalidArgument naming the call and the group.
struct GroupRank {
  int rank;
};
class RankArg {
 public:
  RankArg(int global_rank) : rank_(global_rank), group_relative_(false) {}  // NOLINT
  RankArg(GroupRank r) : rank_(r.rank), group_relative_(true) {}            // NOLINT
  int value() const { return rank_; }
  bool group_relative() const { return group_relative_; }

 private:
  int rank_;
  bool group_relative_;
};

// ------------------------------------------------------------------ collectives
struct CollectiveOptions {
  GroupPtr group;        // null: the world
  bool async_op = false;
  double premul_factor = 1.0;  // the factor of ReduceOp::PREMUL_SUM (reducing calls)
};
WorkPtr all_reduce(DenseTensor* tensor, ReduceOp op = ReduceOp::SUM,
                   const CollectiveOptions& o = {});
WorkPtr broadcast(DenseTensor* tensor, RankArg src, const CollectiveOptions& o = {});
WorkPtr reduce(DenseTensor* tensor, RankArg dst, ReduceOp op = ReduceOp::SUM,
               const CollectiveOptions& o = {});
WorkPtr all_gather_into_tensor(DenseTensor* output, const DenseTensor& input,
                               const CollectiveOptions& o = {});
// `outputs`: empty (filled with size() tensors) or one tensor per group rank.
WorkPtr all_gather(std::vector<DenseTensor>* outputs, const DenseTensor& input,
                   const CollectiveOptions& o = {});
WorkPtr reduce_scatter_tensor(DenseTensor* output, const DenseTensor& input,
                              ReduceOp op = ReduceOp::SUM, const CollectiveOptions& o = {});
WorkPtr all_to_all_single(DenseTensor* output, const DenseTensor& input,
                          const std::vector<int64_t>& output_split_sizes = {},
                          const std::vector<int64_t>& input_split_sizes = {},
                          const CollectiveOptions& o = {});
WorkPtr all_to_all(std::vector<DenseTensor>* outputs, const std::vector<DenseTensor>& inputs,
                   const CollectiveOptions& o = {});
// `gather_list` is used on dst only (empty: filled).
WorkPtr gather(const DenseTensor& tensor, std::vector<DenseTensor>* gather_list, RankArg dst,
               const CollectiveOptions& o = {});
// `scatter_list` is used on src only.
WorkPtr scatter(DenseTensor* tensor, const std::vector<DenseTensor>& scatter_list, RankArg src,
                const CollectiveOptions& o = {});
// device_ids: the devices a device backend's barrier runs on (empty: the group's CPU backend,
// or its device backend when it has no CPU one; this build's device backend is NCCL, one
// device per process, so at most one id).
WorkPtr barrier(const CollectiveOptions& o = {}, const std::vector<int>& device_ids = {});

struct P2POptions {
  GroupPtr group;
  int tag = 0;
};
constexpr int kAnySource = -1;
void send(const DenseTensor& tensor, RankArg dst, const P2POptions& o = {});
// Returns the sender's global rank (src, or the one that came with kAnySource).
int recv(DenseTensor* tensor, RankArg src = kAnySource, const P2POptions& o = {});
WorkPtr isend(const DenseTensor& tensor, RankArg dst, const P2POptions& o = {});
WorkPtr irecv(DenseTensor* tensor, RankArg src = kAnySource, const P2POptions& o = {});

// reduce_scatter with lists: `inputs` has one tensor per group rank; rank r gets the
// reduction of every rank's inputs[r].
WorkPtr reduce_scatter(DenseTensor* output, const std::vector<DenseTensor>& inputs,
                       ReduceOp op = ReduceOp::SUM, const CollectiveOptions& o = {});
// Gather into one tensor of size() blocks on dst (global rank).
WorkPtr gather_into_tensor(DenseTensor* output, const DenseTensor& input, RankArg dst,
                           const CollectiveOptions& o = {});
// Whether `op` applies to complex tensors (run as their real view): SUM, AVG, PREMUL_SUM.
bool supports_complex(ReduceOp op);

// ------------------------------------------------------------------ batches
// One op of a batch_isend_irecv: a send (tensor read) or a receive (tensor written) with a
// global peer rank and a tag.
struct P2POp {
  enum class Kind { kSend, kRecv };
  Kind kind;
  DenseTensor* tensor;
  RankArg peer;  // global, or GroupRank{r} (the seed's group_peer)
  GroupPtr group;  // null: the world; every op of a batch uses one group
  int tag = 0;
  static P2POp isend(DenseTensor* t, RankArg peer, GroupPtr group = nullptr, int tag = 0) {
    return P2POp{Kind::kSend, t, peer, std::move(group), tag};
  }
  static P2POp irecv(DenseTensor* t, RankArg peer, GroupPtr group = nullptr, int tag = 0) {
    return P2POp{Kind::kRecv, t, peer, std::move(group), tag};
  }
};
// Posts every op as one engine group, so any order completes (both directions between one
// pair included). Returns one Work per op.
std::vector<WorkPtr> batch_isend_irecv(const std::vector<P2POp>& ops);

// Several all-reduces as one coalesced group (one fused exchange per dtype on Gloo).
WorkPtr all_reduce_coalesced(std::vector<DenseTensor*> tensors, ReduceOp op = ReduceOp::SUM,
                             const CollectiveOptions& o = {});
// outputs[i] (empty: filled) gets every rank's inputs[i].
WorkPtr all_gather_coalesced(std::vector<std::vector<DenseTensor>>* outputs,
                             const std::vector<DenseTensor>& inputs,
                             const CollectiveOptions& o = {});

// Like barrier(), but through the store, and rank 0 names every rank that did not arrive
// within `timeout` (the group's when unset); with wait_all_ranks=false the first missing
// rank is enough to raise. Raises TimeoutError on every rank that waited.
void monitored_barrier(const GroupPtr& group = nullptr,
                       std::chrono::milliseconds timeout = kUnsetTimeout,
                       bool wait_all_ranks = false);

// ------------------------------------------------------------------ more groups
// Consecutive groups of `group_size` global ranks (world size must divide); every rank
// creates all of them. Returns (this rank's subgroup, all subgroups).
std::pair<GroupPtr, std::vector<GroupPtr>> new_subgroups(int group_size,
                                                         const NewGroupOptions& options = {});
// Groups of the given global ranks (disjoint); every rank creates all of them.
std::pair<GroupPtr, std::vector<GroupPtr>> new_subgroups_by_enumeration(
    const std::vector<std::vector<int>>& ranks_per_subgroup, const NewGroupOptions& options = {});

// outputs[i] gets the reduction of every rank's input_lists[i][group rank], one coalesced
// group (the list form of reduce_scatter, for several tensors at once).
WorkPtr reduce_scatter_coalesced(std::vector<DenseTensor>* outputs,
                                 const std::vector<std::vector<DenseTensor>>& input_lists,
                                 ReduceOp op = ReduceOp::SUM, const CollectiveOptions& o = {});
// The coalesced forms of the single-tensor calls: one group of ops, one Work.
WorkPtr all_gather_single_coalesced(std::vector<DenseTensor>* outputs,
                                    const std::vector<DenseTensor>& inputs,
                                    const CollectiveOptions& o = {});
WorkPtr reduce_scatter_single_coalesced(std::vector<DenseTensor>* outputs,
                                        const std::vector<DenseTensor>& inputs,
                                        ReduceOp op = ReduceOp::SUM,
                                        const CollectiveOptions& o = {});

// Splits `parent` (null: the world) into disjoint groups of PARENT-group ranks (as the seed:
// 0 <= rank < parent size), each in the order given; returns this rank's group (a non-member Group when it is in none).
// Every rank of the world calls it with the same split_ranks, as with new_group (a rank
// outside the parent gets a non-member handle): group ids stay agreed.
GroupPtr split_group(const GroupPtr& parent, const std::vector<std::vector<int>>& split_ranks,
                     const NewGroupOptions& options = {});

// ------------------------------------------------------------------ backends
// Process-wide: adds a backend (name case-insensitive) serving `devices` (empty: {"cpu"},
// as the seed), creatable by name in init_process_group / new_group. A name with ':' or ','
// (they separate a backend config's items) is InvalidArgument. See
// distributed/backend_registry.h.
void register_backend(const std::string& name, distributed::BackendCreator creator,
                      const std::vector<std::string>& devices = {});
// Loads a backend plugin: a shared library exporting
//   extern "C" void paddle_like_backend_plugin_init();
// which calls register_backend(). The program must export its symbols to the plugin (CMake
// ENABLE_EXPORTS), as the plugin uses this library's copy of the runtime. Raises
// InvalidArgument naming the path and dlerror() when it cannot be loaded.
void load_backend_plugin(const std::string& path);

}  // namespace dist
}  // namespace paddle_like
