// Command line of `launch` (torchrun / paddle.distributed.launch style).
#pragma once

#include <string>
#include <vector>

namespace paddle_like {
namespace launch {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr;  // empty: 127.0.0.1 (single node only)
  int master_port = 0;      // 0: a free port (single node only)
  std::string log_dir;      // empty: no per-rank log files
  double grace_s = 5.0;     // SIGTERM -> SIGKILL grace period
  bool quiet = false;       // no "launch: ..." progress lines on success
  bool elastic = false;     // a rank killed by a signal does not stop the others
  bool no_dead_mark = false;  // --elastic: leave a dead rank to the survivors' heartbeat check
  bool no_store = false;    // --no_store: host no store; rank 0 hosts one (plain env://)
  std::string backend;      // "mpi": the job is started by mpirun (RunMpiJob)
  std::vector<std::string> command;  // the rank program and its arguments

  int world_size() const { return nnodes * nproc_per_node; }
};

// Parses argv. On --help prints usage and exits 0; on a bad command line prints what is wrong
// plus the usage to stderr and exits 2.
LaunchOptions ParseLaunchOptions(int argc, char** argv);

const char* LaunchUsage();

}  // namespace launch
}  // namespace paddle_like
