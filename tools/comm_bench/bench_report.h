// comm_bench's results and their forms: the nccl-tests style text table (streamed row by
// row), CSV, JSON and a gnuplot PNG of busbw against size.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace paddle_like {
namespace bench {

// Per-op times of one rank's timed iterations, averaged over ranks: the mean (nccl-tests'
// `time`), the median and the 90th percentile. Sync mode times every op on its own; async mode
// has one sample per round (the round's mean).
struct Stats {
  double mean = 0, median = 0, p90 = 0;
};

// A raw engine's figures at one size (--baseline, --raw_only).
struct RawResult {
  std::string name;
  Stats t;
  bool ours = false;  // our engine in another configuration (--check_ab), not a raw engine
};

struct Half {
  bool present = false;
  bool ours = true;  // false with --raw_only: only `raw` holds figures
  Stats t;           // us
  double algbw = 0, busbw = 0;  // GB/s, from the mean (nccl-tests)
  int64_t wrong = -1;           // -1: not checked
  std::vector<RawResult> raw;
  // The raw engine with the lowest median; nullptr without any.
  const RawResult* BestRaw() const;
};

struct Row {
  std::string op;
  int64_t bytes = 0, count = 0;
  std::string type, redop;
  int root = -1;
  Half oop, ip;
};

struct CoalesceResult {
  bool present = false;
  int ops = 0;
  int64_t bytes = 0;        // per op
  double one_by_one_us = 0;  // per batch of `ops`
  double coalesced_us = 0;
  int64_t wrong = 0;
};

struct Report {
  std::string backend, mode, dtype, redop, baseline_name, host;
  int world = 1, iters = 0, rounds = 1, warmup = 0;
  bool baseline = false;
  bool table = true;  // a size sweep runs (else only the coalescing benchmark)
  std::vector<Row> rows;
  std::vector<std::string> notes;  // "# ..." lines (skipped ops)
  CoalesceResult coalesce;

  double AvgBusBw() const;
  int64_t TotalWrong() const;
};

// Text to `out` (rank 0's stdout), as the run goes.
void PrintHeader(FILE* out, const Report& r);
void PrintRow(FILE* out, const Report& r, const Row& row);
void PrintFooter(FILE* out, const Report& r);
void PrintCoalesce(FILE* out, const CoalesceResult& c);

// False (with a message on stderr) when the file cannot be written.
bool WriteCsv(const std::string& path, const Report& r);
bool WriteJson(const std::string& path, const Report& r);
// Runs gnuplot; when it is not installed, says so on stdout and returns true.
bool WritePlot(const std::string& path, const Report& r);

}  // namespace bench
}  // namespace paddle_like
