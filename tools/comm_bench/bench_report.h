// comm_bench's results and their forms: the nccl-tests style text table (streamed row by
// row), CSV, JSON and a gnuplot PNG of busbw against size.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace paddle_like {
namespace bench {

struct Half {
  bool present = false;
  double time_us = 0, algbw = 0, busbw = 0;  // GB/s
  int64_t wrong = -1;                        // -1: not checked
  double raw_us = 0;                         // > 0 with --baseline
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
