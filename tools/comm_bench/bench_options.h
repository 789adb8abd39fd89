// comm_bench's command line (nccl-tests flag names where they exist).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "phi/core/data_type.h"
#include "phi/core/distributed/reduce_op.h"

namespace paddle_like {
namespace bench {

struct BenchOptions {
  std::vector<std::string> ops;  // expanded op names, in run order
  bool coalesce = false;         // --coalesce, or "coalesce" among the ops
  int64_t min_bytes = 32 * 1024 * 1024;
  int64_t max_bytes = 32 * 1024 * 1024;
  double step_factor = 2.0;      // -f; 0 with -i
  int64_t step_bytes = 0;        // -i: additive step instead of a factor
  int iters = 20;
  int warmup = 5;
  phi::DataType dtype = phi::DataType::FLOAT32;
  phi::distributed::ReduceOp redop = phi::distributed::ReduceOp::SUM;
  int root = 0;
  std::string backend = "gloo";
  bool sync = false;  // --sync: sync_op=true, each op waited; default --async
  bool check = true;  // -k 0 disables the #wrong check
  bool in_place = true;  // --no-inplace skips the in-place half
  bool out_of_place = true;  // --no-outofplace skips the out-of-place half
  bool baseline = false;
  bool raw_only = false;  // only the raw Gloo algorithms, no process group
  bool check_ab = false;  // also time ours with the agreement check off, in the same rounds
  std::string raw_algos;  // comma-separated names; empty: all of them
  // Rounds of `iters` timed iterations; the time is the median round. With --baseline the
  // rounds alternate ours / raw, so load from elsewhere hits both alike (default 5 then).
  int rounds = 0;  // 0: 1, or 5 with --baseline
  std::string csv_path, json_path, plot_path;
  std::string init_method = "env://";
  int timeout_s = 300;
  int coalesce_ops = 100;
  int64_t coalesce_bytes = 4096;
};

// The collectives comm_bench knows, in the order "all" runs them.
const std::vector<std::string>& AllOpNames();

// Parses argv; --help prints usage and exits 0, a bad command line exits 2 with a message.
BenchOptions ParseBenchOptions(int argc, char** argv);

// "8" "4K" "64M" "1G" (binary multiples) -> bytes; -1 when malformed.
int64_t ParseBytes(const std::string& s);
// 8 -> "8", 4096 -> "4K"... for headers.
std::string FormatBytes(int64_t b);

}  // namespace bench
}  // namespace paddle_like
