// Runtime flags. Each is a gflags flag and can also be set as an environment variable
// FLAGS_<name> (read once, when the library is loaded; a command-line value parsed later
// by the program still wins).
#pragma once

#include <gflags/gflags.h>

// Host blocks in Task::Wait until the op finished (or its deadline passed). CPU ops always
// block the host, because the CPU calc stream is the host thread.
DECLARE_bool(comm_blocking_wait);
DECLARE_bool(nccl_blocking_wait);
// Keep the last async_trace_count ops of each group in the flight recorder.
DECLARE_bool(enable_async_trace);
DECLARE_int32(async_trace_count);
// Create communicators when the group is built, not at the first collective.
DECLARE_bool(eager_communication_connection);
// Synchronize after every collective (debugging, benchmarks).
DECLARE_bool(benchmark);
// How the ranks check that they run the same collective (op, dtype, size, reduce op, root),
// raising on every rank when they do not:
//  - "in_band" (the default): before each collective of a CPU engine, all-gather a small
//    record of what every rank runs (distributed/op_agreement.h; small all-reduces carry it
//    in their own exchange). Without a check a size mismatch can abort inside Gloo.
//  - "store": compare every collective's fingerprint through the store before issuing it, on
//    every backend, NCCL included (distributed/collective_fingerprint.h: also names a rank
//    that never arrives; one store round trip per op, a debugging aid).
//  - "off": no check (the shared-memory path still compares each op's signature in its
//    first step).
// Read when a group is made (store) and per op (in_band).
DECLARE_string(collective_check);
namespace phi {
enum class CollectiveCheck { kInBand, kStore, kOff };
// FLAGS_collective_check parsed; InvalidArgument naming the value when it is none of them.
CollectiveCheck CollectiveCheckMode();
}  // namespace phi
// The comm watchdog (distributed/watchdog.h): one thread per process watches every in-flight
// op of every group, publishes each group's progress through its store and, when an op is
// past its group's timeout and nobody has been told, writes a report naming the ranks that
// are behind. Then: "abort" (the default: the process exits with code 70 after the
// report), "fail" (the group's pending and later ops raise the report), or "log".
DECLARE_bool(comm_watchdog);
DECLARE_string(comm_watchdog_action);
DECLARE_int32(comm_watchdog_interval_ms);
// The liveness heartbeat (phi/core/distributed/liveness.h): every process of a dist world
// publishes that it is alive this often; 0 turns it off (errors then name ranks without
// saying whether they are alive).
DECLARE_int32(liveness_interval_ms);
// Whether the store marks a process dead the moment its heartbeat's connection closes without
// a goodbye (off: only its heartbeat deadline, or a launcher's mark, says so).
DECLARE_bool(liveness_dead_on_close);
// Where flight-recorder dumps go (on a watchdog timeout, on SIGUSR1, on request); "" means
// the log only for timeouts, and /tmp/paddle_like_fr_<pid> for SIGUSR1.
DECLARE_string(comm_dump_dir);
// The comm timeline (distributed/comm_trace.h): with a directory, every comm task and compute
// span is written at exit as a Chrome/Perfetto JSON trace (tools/merge_traces merges ranks).
DECLARE_string(comm_trace_dir);
DECLARE_int32(comm_trace_max_events);
// A process hosting a TCPStore (rank 0 started without a launcher) keeps serving the
// clients of other processes for up to this many seconds when it ends before them, so they
// can still use the store to name what failed (phi/core/distributed/store/tcp_store.h).
DECLARE_int32(store_host_linger_s);
// How long a CPU transport's wait (the shared-memory group, the two-rank socket paths) polls
// for its peer before it blocks, in microseconds, under one rule (spin_policy.h): a wait that
// outlasted it makes the next one block at once. 0 never spins (CPUs shared by more ranks).
DECLARE_int32(gloo_spin_us);
// The ranks of a CPU (Gloo) group that all share a host exchange through a shared-memory
// segment instead of loopback TCP (phi/core/distributed/shm_group.h). Every rank must have it
// on; off on any rank keeps that group on the network. It also moves the point-to-point
// traffic between two such ranks through a shared-memory channel (p2p_shm_channel.h), with
// large messages read from the sender's memory (p2p_transport_internal.h); off on either rank
// keeps that pair on the socket.
DECLARE_bool(cpu_shm_transport);
// The shared-memory segment's slot per rank, in KiB (0, the default: 1 MiB up to 8 ranks,
// less beyond). Read when a group's segment is made; rank 0's value sizes it.
DECLARE_int32(cpu_shm_slot_kb);
// Gloo's all-reduce algorithm for the sizes above the fused exchange on a network path:
// "auto" (by size: halving-doubling, ring from 32 MiB on two ranks and 4 MiB on more),
// "ring" or "halving_doubling" (Gloo's bcube, base 2). Read when a communicator is made;
// every rank must set it alike.
DECLARE_string(gloo_allreduce_algo);
// The MPI backend's gather, scatter and all-to-all use MPI's own calls; false: the engine's
// grouped sends and receives. Read once per process; every rank must set it alike.
DECLARE_bool(mpi_native_collectives);
// MPI all-reduces of more than mpi_allreduce_segment_above bytes run as MPI_Allreduce calls
// of mpi_allreduce_segment_bytes each (0 bytes: never segment). Read when a communicator is
// made; every rank must set them alike.
DECLARE_int64(mpi_allreduce_segment_bytes);
DECLARE_int64(mpi_allreduce_segment_above);
// Default timeout of a process group, in seconds.
DECLARE_int32(default_group_timeout_s);
// Bound on allocations whose free waits for a stream; past it the oldest are waited for.
DECLARE_int32(max_pending_stream_frees);

namespace phi {
// Re-reads FLAGS_<name> environment variables for every registered flag (including flags
// that other libraries registered). Returns the number of flags set.
int SetFlagsFromEnv();
}  // namespace phi
