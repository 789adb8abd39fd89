#include "tools/comm_bench/bench_options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "tools/common/arg_parser.h"

namespace paddle_like {
namespace bench {
namespace {

const char* kUsage =
    "usage: comm_bench [options]   (under launch, or alone as world size 1)\n"
    "\n"
    "  -c, --op NAME[,NAME..]  allreduce allgather reducescatter broadcast reduce alltoall\n"
    "                          sendrecv isendrecv gather scatter coalesce, or all (default\n"
    "                          allreduce); isendrecv is sendrecv's ring shift as ungrouped\n"
    "                          irecv + isend\n"
    "  -b, --minbytes SIZE     smallest size, e.g. 8, 4K, 1M (default 32M)\n"
    "  -e, --maxbytes SIZE     largest size (default 32M)\n"
    "  -f, --stepfactor F      multiply the size by F each step (default 2)\n"
    "  -i, --stepbytes SIZE    add SIZE each step instead\n"
    "  -n, --iters N           timed iterations per size (default 20)\n"
    "      --rounds R          time R rounds of N iterations, report the median round\n"
    "                          (default 1; 5 with --baseline, alternating ours and raw)\n"
    "  -w, --warmup_iters N    untimed iterations first (default 5)\n"
    "  -d, --datatype T        float32 float16 bfloat16 float64 int32 int64 int8 uint8\n"
    "  -o, --op_type OP        sum prod min max avg (default sum)\n"
    "  -r, --root R            root of broadcast, reduce, gather, scatter (default 0)\n"
    "  -k, --check 0|1         verify every result, the #wrong column (default 1)\n"
    "      --no-inplace        skip the in-place half of the table\n"
    "      --no-outofplace     skip the out-of-place half (ops that have an in-place form)\n"
    "      --backend B         gloo (default), nccl (GPU builds) or mpi (MPI builds; under\n"
    "                          mpirun, which gives ranks and, without MASTER_ADDR, the store)\n"
    "      --sync              sync_op=true: every op waited before the next one\n"
    "      --async             issue all iterations, then wait for all (default)\n"
    "      --baseline          also time the raw engine on the same sizes, in these processes\n"
    "                          (allreduce): every Gloo algorithm (ring, ring_chunked,\n"
    "                          halving_doubling, bcube, gloo::allreduce) with its buffers\n"
    "                          bound once per size, ncclAllReduce, or MPI_Allreduce; prints\n"
    "                          the best-of ratio (our median / the best raw median) per size\n"
    "      --raw_only          only the raw Gloo algorithms, in processes that hold no group\n"
    "                          (the separate-process baseline; tools/gloo_latency_compare.sh)\n"
    "      --raw_algos A,B     the raw Gloo algorithms to run (default: all five)\n"
    "      --check_ab          also time our all-reduce with the agreement check off, in\n"
    "                          the same rounds: the check's cost, measured in one run\n"
    "      --coalesce          100 x 4 KiB allreduces one by one vs coalesced\n"
    "      --coalesce_ops N    ops in the coalescing benchmark (default 100)\n"
    "      --coalesce_bytes S  bytes per op there (default 4K)\n"
    "      --csv FILE          also write the results as CSV\n"
    "      --json FILE         also write the results as JSON\n"
    "      --plot FILE.png     busbw vs size, through gnuplot when installed\n"
    "      --init_method URL   env:// (default), tcp://host:port?..., file:///path?...\n"
    "      --timeout_s S       group and store timeout (default 300)\n"
    "  -h, --help              this text\n";

[[noreturn]] void Die(const std::string& why) { tools::UsageError("comm_bench", kUsage, why); }

long long ParseInt(const std::string& flag, const std::string& v, long long lo) {
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || errno || *end || x < lo) {
    Die(flag + " needs an integer >= " + std::to_string(lo) + ", got '" + v + "'");
  }
  return x;
}

phi::DataType ParseDtype(const std::string& s) {
  using phi::DataType;
  if (s == "float32" || s == "float" || s == "fp32") return DataType::FLOAT32;
  if (s == "float16" || s == "half" || s == "fp16") return DataType::FLOAT16;
  if (s == "bfloat16" || s == "bf16") return DataType::BFLOAT16;
  if (s == "float64" || s == "double" || s == "fp64") return DataType::FLOAT64;
  if (s == "int32" || s == "int") return DataType::INT32;
  if (s == "int64") return DataType::INT64;
  if (s == "int8") return DataType::INT8;
  if (s == "uint8") return DataType::UINT8;
  Die("unknown datatype '" + s + "'");
}

phi::distributed::ReduceOp ParseRedop(const std::string& s) {
  using phi::distributed::ReduceOp;
  if (s == "sum") return ReduceOp::SUM;
  if (s == "prod") return ReduceOp::PRODUCT;
  if (s == "min") return ReduceOp::MIN;
  if (s == "max") return ReduceOp::MAX;
  if (s == "avg") return ReduceOp::AVG;
  Die("unknown reduce op '" + s + "' (sum prod min max avg)");
}

}  // namespace

const std::vector<std::string>& AllOpNames() {
  static const std::vector<std::string> names = {
      "allreduce", "allgather", "reducescatter", "broadcast", "reduce",
      "alltoall",  "sendrecv",  "isendrecv",     "gather",  "scatter"};
  return names;
}

int64_t ParseBytes(const std::string& s) {
  if (s.empty()) return -1;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (errno || end == s.c_str() || v < 0) return -1;
  std::string suffix = end;
  double mult = 1;
  if (suffix == "" || suffix == "B" || suffix == "b") {
    mult = 1;
  } else if (suffix == "K" || suffix == "k" || suffix == "KB" || suffix == "KiB") {
    mult = 1024.0;
  } else if (suffix == "M" || suffix == "m" || suffix == "MB" || suffix == "MiB") {
    mult = 1024.0 * 1024;
  } else if (suffix == "G" || suffix == "g" || suffix == "GB" || suffix == "GiB") {
    mult = 1024.0 * 1024 * 1024;
  } else {
    return -1;
  }
  return static_cast<int64_t>(std::llround(v * mult));
}

std::string FormatBytes(int64_t b) {
  const char* units[] = {"", "K", "M", "G"};
  int u = 0;
  while (u < 3 && b >= 1024 && b % 1024 == 0) {
    b /= 1024;
    ++u;
  }
  return std::to_string(b) + units[u];
}

BenchOptions ParseBenchOptions(int argc, char** argv) {
  BenchOptions o;
  std::string ops = "allreduce";
  bool ops_given = false;
  tools::ArgParser args(argc, argv, "comm_bench", kUsage);
  while (args.Next()) {
    const std::string& flag = args.flag();
    auto next = [&] { return args.Value(); };
    auto bytes = [&](const std::string& v) {
      int64_t b = ParseBytes(v);
      if (b < 0) Die(flag + " needs a size like 8, 4K or 64M, got '" + v + "'");
      return b;
    };
    if (flag == "-h" || flag == "--help") {
      args.Help();
    } else if (flag == "-c" || flag == "--op") {
      ops = next();
      ops_given = true;
    } else if (flag == "-b" || flag == "--minbytes") {
      o.min_bytes = bytes(next());
    } else if (flag == "-e" || flag == "--maxbytes") {
      o.max_bytes = bytes(next());
    } else if (flag == "-f" || flag == "--stepfactor") {
      std::string v = next();
      char* end = nullptr;
      o.step_factor = std::strtod(v.c_str(), &end);
      if (*end || !(o.step_factor > 1.0)) Die("-f needs a factor > 1, got '" + v + "'");
      o.step_bytes = 0;
    } else if (flag == "-i" || flag == "--stepbytes") {
      o.step_bytes = bytes(next());
      if (o.step_bytes <= 0) Die("-i needs a size > 0");
    } else if (flag == "-n" || flag == "--iters") {
      o.iters = static_cast<int>(ParseInt(flag, next(), 1));
    } else if (flag == "--rounds") {
      o.rounds = static_cast<int>(ParseInt(flag, next(), 1));
    } else if (flag == "-w" || flag == "--warmup_iters") {
      o.warmup = static_cast<int>(ParseInt(flag, next(), 0));
    } else if (flag == "-d" || flag == "--datatype") {
      o.dtype = ParseDtype(next());
    } else if (flag == "-o" || flag == "--op_type") {
      o.redop = ParseRedop(next());
    } else if (flag == "-r" || flag == "--root") {
      o.root = static_cast<int>(ParseInt(flag, next(), 0));
    } else if (flag == "-k" || flag == "--check") {
      o.check = ParseInt(flag, next(), 0) != 0;
    } else if (flag == "--no-inplace") {
      o.in_place = false;
    } else if (flag == "--no-outofplace") {
      o.out_of_place = false;
    } else if (flag == "--backend") {
      o.backend = next();
      if (o.backend != "gloo" && o.backend != "nccl" && o.backend != "mpi") {
        Die("--backend must be gloo, nccl or mpi, got '" + o.backend + "'");
      }
    } else if (flag == "--sync") {
      o.sync = true;
    } else if (flag == "--async") {
      o.sync = false;
    } else if (flag == "--baseline") {
      o.baseline = true;
    } else if (flag == "--check_ab") {
      o.check_ab = true;
    } else if (flag == "--raw_only") {
      o.raw_only = true;
    } else if (flag == "--raw_algos") {
      o.raw_algos = next();
    } else if (flag == "--coalesce") {
      o.coalesce = true;
    } else if (flag == "--coalesce_ops") {
      o.coalesce_ops = static_cast<int>(ParseInt(flag, next(), 1));
    } else if (flag == "--coalesce_bytes") {
      o.coalesce_bytes = bytes(next());
    } else if (flag == "--csv") {
      o.csv_path = next();
    } else if (flag == "--json") {
      o.json_path = next();
    } else if (flag == "--plot") {
      o.plot_path = next();
    } else if (flag == "--init_method") {
      o.init_method = next();
    } else if (flag == "--timeout_s") {
      o.timeout_s = static_cast<int>(ParseInt(flag, next(), 1));
    } else {
      Die("unknown option '" + args.arg() + "'");
    }
  }
  std::stringstream ss(ops);
  std::string name;
  while (std::getline(ss, name, ',')) {
    if (name == "all") {
      for (const auto& n : AllOpNames()) o.ops.push_back(n);
      o.coalesce = true;
    } else if (name == "coalesce") {
      o.coalesce = true;
    } else {
      bool known = false;
      for (const auto& n : AllOpNames()) known |= n == name;
      if (!known) Die("unknown op '" + name + "'");
      o.ops.push_back(name);
    }
  }
  // `--coalesce` alone runs just the coalescing benchmark.
  if (o.coalesce && !ops_given) o.ops.clear();
  if (o.raw_only) {
    if (o.backend != "gloo") Die("--raw_only runs raw Gloo: it needs --backend gloo");
    for (const auto& n : o.ops) {
      if (n != "allreduce") Die("--raw_only times allreduce only, not '" + n + "'");
    }
    if (o.coalesce) Die("--raw_only has no coalescing benchmark");
    if (o.check_ab) Die("--check_ab times our engine: not with --raw_only");
  }
  if (o.rounds == 0) o.rounds = (o.baseline || o.raw_only || o.check_ab) ? 5 : 1;
  if (o.min_bytes > o.max_bytes) Die("-b must not exceed -e");
  if (o.coalesce_bytes <= 0) Die("--coalesce_bytes must be > 0");
  return o;
}

}  // namespace bench
}  // namespace paddle_like
