// launch: starts the ranks of a job (see launch_options.cc for the command line).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tools/launch/launch_options.h"
#include "tools/launch/launcher.h"

namespace {

// An MPI job's ranks must be mpirun's processes (MPI_COMM_WORLD comes from its runtime), so
// `--backend mpi` hands the job to mpirun. More ranks than cores need --oversubscribe, and
// OpenMPI refuses root without --allow-run-as-root: the launcher's user asked for both by
// asking for the job.
int RunMpiJob(const paddle_like::launch::LaunchOptions& o) {
  std::vector<std::string> args = {"mpirun", "-np", std::to_string(o.nproc_per_node)};
  if (static_cast<unsigned>(o.nproc_per_node) > std::thread::hardware_concurrency()) {
    args.push_back("--oversubscribe");
  }
  if (geteuid() == 0) args.push_back("--allow-run-as-root");
  if (o.master_port != 0) {  // a store address given: every rank gets it
    setenv("MASTER_ADDR", o.master_addr.c_str(), 1);
    setenv("MASTER_PORT", std::to_string(o.master_port).c_str(), 1);
    args.insert(args.end(), {"-x", "MASTER_ADDR", "-x", "MASTER_PORT"});
  }
  args.insert(args.end(), o.command.begin(), o.command.end());
  std::string line;
  for (const auto& a : args) line += (line.empty() ? "" : " ") + a;
  if (!o.quiet) std::fprintf(stderr, "launch: MPI job: %s\n", line.c_str());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::fflush(nullptr);
  execvp("mpirun", argv.data());
  std::fprintf(stderr,
               "launch: cannot run mpirun (%s): MPI jobs start with mpirun (Debian: "
               "openmpi-bin); run `%s` where it is installed\n",
               std::strerror(errno), line.c_str());
  return 127;
}

}  // namespace

int main(int argc, char** argv) {
  auto options = paddle_like::launch::ParseLaunchOptions(argc, argv);
  if (options.backend == "mpi") return RunMpiJob(options);
  return paddle_like::launch::RunJob(options);
}
