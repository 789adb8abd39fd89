#include "tools/launch/launch_options.h"

#include <cerrno>
#include <cstdlib>
#include <string>

#include "tools/common/arg_parser.h"

namespace paddle_like {
namespace launch {
namespace {

[[noreturn]] void Die(const std::string& why) { tools::UsageError("launch", LaunchUsage(), why); }

long ParseLong(const std::string& flag, const std::string& v, long lo, long hi) {
  errno = 0;
  char* end = nullptr;
  long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || errno != 0 || *end != '\0' || x < lo || x > hi) {
    Die(flag + " needs an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
        "], got '" + v + "'");
  }
  return x;
}

double ParseDouble(const std::string& flag, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || errno != 0 || *end != '\0' || !(x >= 0)) {
    Die(flag + " needs a number >= 0, got '" + v + "'");
  }
  return x;
}

}  // namespace

const char* LaunchUsage() {
  return "usage: launch [options] [--] prog [args...]\n"
         "\n"
         "Starts nproc_per_node ranks of prog on this node, hosts the TCPStore (node_rank 0)\n"
         "and sets RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT\n"
         "PADDLE_TRAINER_ID PADDLE_TRAINERS_NUM PADDLE_MASTER PADDLE_RANK_IN_NODE\n"
         "PADDLE_STORE_HOSTED=1 for each rank (init method env://).\n"
         "\n"
         "  --nproc_per_node N   ranks on this node (default 1)\n"
         "  --nnodes K           nodes in the job (default 1)\n"
         "  --node_rank R        this node's index, 0..K-1 (default 0)\n"
         "  --master_addr A      the store's address (default 127.0.0.1; required when K > 1)\n"
         "  --master_port P      the store's port (default: a free port; required when K > 1)\n"
         "  --log_dir DIR        also write each rank's output to DIR/rank_R.log\n"
         "  --grace_s S          seconds between SIGTERM and SIGKILL when stopping (default 5)\n"
         "  --quiet              no progress lines from the launcher itself\n"
         "  --elastic            a rank killed by a signal does not stop the others: it is\n"
         "                       reported, marked dead in the store (liveness/R/dead, which\n"
         "                       DataParallel's elastic mode reads) and the job goes on\n"
         "  --no_dead_mark       with --elastic, do not mark a dead rank: the survivors find\n"
         "                       it by its heartbeat stopping (slower; what a rank on a lost\n"
         "                       node gets)\n"
         "  --no_store           host no store and leave PADDLE_STORE_HOSTED unset: rank 0\n"
         "                       hosts the store on MASTER_PORT, as plain env:// expects\n"
         "                       (torch.distributed's own TCPStore, paddle_like.torch_backend);\n"
         "                       with --elastic, dead ranks are reported but not marked\n"
         "  --backend mpi        an MPI job: runs `mpirun -np N prog args` instead (MPI ranks\n"
         "                       must be started by mpirun; the ranks find each other through\n"
         "                       mpirun's variables and MPI). One node only: for several,\n"
         "                       start mpirun yourself with a hostfile\n"
         "  -h, --help           this text\n"
         "\n"
         "Output lines are prefixed with \"[rank R] \". When a rank fails, the others get SIGTERM,\n"
         "then SIGKILL after the grace period; launch exits non-zero naming the rank. SIGINT and\n"
         "SIGTERM are forwarded to every rank. Exit status 0 only when every rank exits 0 (with\n"
         "--elastic: every rank that was not killed by a signal, and at least one).\n";
}

LaunchOptions ParseLaunchOptions(int argc, char** argv) {
  LaunchOptions o;
  bool have_addr = false, have_port = false;
  tools::ArgParser args(argc, argv, "launch", LaunchUsage());
  while (args.Next()) {
    // These match the whole argument: "--help=x" and "--quiet=1" are unknown options.
    const std::string& a = args.arg();
    if (a == "--") {
      o.command = args.Rest(/*include_current=*/false);
      break;
    }
    if (a == "-h" || a == "--help") args.Help();
    if (a.size() < 2 || a[0] != '-') {  // the program starts here
      o.command = args.Rest(/*include_current=*/true);
      break;
    }
    if (a == "--quiet") {
      o.quiet = true;
      continue;
    }
    if (a == "--elastic") {
      o.elastic = true;
      continue;
    }
    if (a == "--no_dead_mark") {
      o.no_dead_mark = true;
      continue;
    }
    if (a == "--no_store" || a == "--no-store") {
      o.no_store = true;
      continue;
    }
    const std::string& flag = args.flag();
    auto next = [&] { return args.Value(); };
    if (flag == "--nproc_per_node" || flag == "--nproc-per-node") {
      o.nproc_per_node = static_cast<int>(ParseLong(flag, next(), 1, 4096));
    } else if (flag == "--nnodes") {
      o.nnodes = static_cast<int>(ParseLong(flag, next(), 1, 100000));
    } else if (flag == "--node_rank" || flag == "--node-rank") {
      o.node_rank = static_cast<int>(ParseLong(flag, next(), 0, 100000));
    } else if (flag == "--master_addr" || flag == "--master-addr") {
      o.master_addr = next();
      have_addr = true;
      if (o.master_addr.empty()) Die("--master_addr must not be empty");
    } else if (flag == "--master_port" || flag == "--master-port") {
      o.master_port = static_cast<int>(ParseLong(flag, next(), 0, 65535));
      have_port = o.master_port != 0;
    } else if (flag == "--backend") {
      o.backend = next();
      if (o.backend != "mpi") {
        Die("--backend takes 'mpi' (other backends need no launcher support), got '" +
            o.backend + "'");
      }
    } else if (flag == "--log_dir" || flag == "--log-dir") {
      o.log_dir = next();
    } else if (flag == "--grace_s" || flag == "--grace-s") {
      o.grace_s = ParseDouble(flag, next());
    } else {
      Die("unknown option '" + a + "'");
    }
  }
  if (o.command.empty()) Die("no program to launch");
  if (o.node_rank >= o.nnodes) {
    Die("--node_rank " + std::to_string(o.node_rank) + " is not in [0, --nnodes " +
        std::to_string(o.nnodes) + ")");
  }
  if (o.nnodes > 1 && (!have_addr || !have_port)) {
    Die("a multi-node job (--nnodes > 1) needs --master_addr and --master_port, the same on "
        "every node");
  }
  if (o.backend == "mpi" && (o.nnodes > 1 || o.elastic || !o.log_dir.empty())) {
    Die("--backend mpi runs mpirun on this node only, without --nnodes, --elastic or "
        "--log_dir: for more, start the job with mpirun yourself (mpirun --hostfile H -np N "
        "prog ...)");
  }
  if (o.master_addr.empty()) o.master_addr = "127.0.0.1";
  return o;
}

}  // namespace launch
}  // namespace paddle_like
