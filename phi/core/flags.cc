#include "phi/core/flags.h"

#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <glog/logging.h>

#include "phi/core/errors.h"

DEFINE_bool(comm_blocking_wait, false,
            "Task::Wait blocks the host until the op completes or its deadline passes");
DEFINE_bool(nccl_blocking_wait, false, "NCCL name of comm_blocking_wait; either enables it");
DEFINE_bool(enable_async_trace, true, "Record every collective in the flight recorder");
DEFINE_int32(async_trace_count, 256, "Ops kept per group in the flight recorder");
DEFINE_bool(eager_communication_connection, false,
            "Create communicators when a process group is constructed");
DEFINE_bool(benchmark, false, "Synchronize after each collective");
DEFINE_string(collective_check, "in_band",
              "How ranks check that they run the same collective: in_band (CPU groups, one "
              "small all-gather per op), store (every backend, through the store), or off");
DEFINE_bool(comm_watchdog, true, "Run the comm watchdog thread (see flags.h)");
DEFINE_string(comm_watchdog_action, "abort",
              "What the watchdog does on a timeout nobody was told of: abort, fail or log");
DEFINE_int32(comm_watchdog_interval_ms, 500, "How often the watchdog looks and publishes");
DEFINE_int32(liveness_interval_ms, 500, "How often a process publishes its heartbeat (flags.h)");
DEFINE_bool(liveness_dead_on_close, true, "The store marks a process dead when it ends (flags.h)");
DEFINE_string(comm_dump_dir, "", "Directory for flight-recorder dumps");
DEFINE_string(comm_trace_dir, "", "Directory for the comm timeline (Chrome JSON); empty: off");
DEFINE_int32(comm_trace_max_events, 1000000, "Events the comm timeline keeps at most");
DEFINE_int32(store_host_linger_s, 10,
             "Seconds a store host serves other processes' clients after it ends (see flags.h)");
DEFINE_int32(gloo_spin_us, 1000, "Microseconds a CPU transport's wait polls before it blocks (flags.h)");
DEFINE_bool(cpu_shm_transport, true, "CPU groups on one host use shared memory (flags.h)");
DEFINE_int32(cpu_shm_slot_kb, 0, "Shared-memory slot size in KiB (0: by group size; flags.h)");
DEFINE_string(gloo_allreduce_algo, "auto",
              "Gloo's all-reduce above the fused exchange: auto, ring, halving_doubling");
DEFINE_bool(mpi_native_collectives, true,
            "MPI gather, scatter and all-to-all through MPI's own calls (flags.h)");
DEFINE_int64(mpi_allreduce_segment_bytes, int64_t{1} << 20,
             "MPI all-reduces above mpi_allreduce_segment_above run in calls of this size");
DEFINE_int64(mpi_allreduce_segment_above, int64_t{16} << 20,
             "Bytes above which an MPI all-reduce is segmented (0 bytes: never)");
DEFINE_int32(default_group_timeout_s, 1800, "Default process-group timeout in seconds");
DEFINE_int32(max_pending_stream_frees, 4096,
             "Deferred frees kept before the allocator waits on the oldest");

namespace phi {

CollectiveCheck CollectiveCheckMode() {
  // Asked by every CPU op: string_view compares sizes before bytes.
  const std::string_view v = FLAGS_collective_check;
  if (v == std::string_view("in_band")) return CollectiveCheck::kInBand;
  if (v == std::string_view("store")) return CollectiveCheck::kStore;
  if (v == std::string_view("off")) return CollectiveCheck::kOff;
  PADDLE_THROW(errors::InvalidArgument(
      "FLAGS_collective_check='%s': expected 'in_band', 'store' or 'off'.",
      FLAGS_collective_check.c_str()));
}

int SetFlagsFromEnv() {
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);
  int n = 0;
  for (const auto& f : flags) {
    const char* v = std::getenv(("FLAGS_" + f.name).c_str());
    if (v == nullptr) continue;
    if (gflags::SetCommandLineOption(f.name.c_str(), v).empty()) {
      LOG(WARNING) << "ignoring FLAGS_" << f.name << "=" << v << ": not a valid "
                   << f.type;
    } else {
      ++n;
    }
  }
  return n;
}

namespace {
// Flags defined above are registered by the time this initializer runs (same TU, in order).
const int kFlagsFromEnv = SetFlagsFromEnv();
}  // namespace

}  // namespace phi
