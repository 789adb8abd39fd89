#include "tools/comm_bench/bench_report.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "tools/common/gnuplot.h"

namespace paddle_like {
namespace bench {
namespace {

std::string Num(double v, int prec = 2) {
  char b[64];
  std::snprintf(b, sizeof(b), "%.*f", prec, v);
  return b;
}

std::string JsonString(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof(b), "\\u%04x", c);
      o += b;
    } else {
      o += c;
    }
  }
  return o + "\"";
}

std::string JsonStats(const Stats& t) {
  return "\"time_us\": " + Num(t.mean, 3) + ", \"median_us\": " + Num(t.median, 3) +
         ", \"p90_us\": " + Num(t.p90, 3);
}

std::string JsonHalf(const Half& h) {
  if (!h.present) return "null";
  std::ostringstream o;
  o << "{";
  if (h.ours) {
    o << JsonStats(h.t) << ", \"algbw_gbps\": " << Num(h.algbw, 4)
      << ", \"busbw_gbps\": " << Num(h.busbw, 4)
      << ", \"wrong\": " << (h.wrong < 0 ? std::string("null") : std::to_string(h.wrong));
  } else {
    o << "\"time_us\": null";
  }
  if (!h.raw.empty()) {
    o << ", \"raw\": [";
    for (size_t i = 0; i < h.raw.size(); ++i) {
      o << (i ? ", " : "") << "{\"name\": " << JsonString(h.raw[i].name) << ", "
        << JsonStats(h.raw[i].t) << (h.raw[i].ours ? ", \"ours\": true" : "") << "}";
    }
    o << "]";
    if (const RawResult* best = h.BestRaw()) {
      o << ", \"best_raw\": " << JsonString(best->name);
      if (h.ours && best->t.median > 0) {
        o << ", \"ratio_median_to_best_raw\": " << Num(h.t.median / best->t.median, 4);
      }
    }
  }
  return o.str() + "}";
}

void PrintHalf(FILE* out, const Half& h, bool baseline) {
  if (!h.present || !h.ours) {
    std::fprintf(out, "  %9s %9s %9s %7s %7s %6s", "N/A", "N/A", "N/A", "N/A", "N/A", "N/A");
    if (baseline) {
      const RawResult* best = h.present ? h.BestRaw() : nullptr;
      if (best != nullptr) {
        std::fprintf(out, " %9.1f %6s", best->t.median, "");
      } else {
        std::fprintf(out, " %9s %6s", "", "");
      }
    }
    return;
  }
  std::string wrong = h.wrong < 0 ? "N/A" : std::to_string(h.wrong);
  std::fprintf(out, "  %9.1f %9.1f %9.1f %7.2f %7.2f %6s", h.t.mean, h.t.median, h.t.p90,
               h.algbw, h.busbw, wrong.c_str());
  if (baseline) {
    const RawResult* best = h.BestRaw();
    if (best != nullptr && best->t.median > 0) {
      std::fprintf(out, " %9.1f %6.3f", best->t.median, h.t.median / best->t.median);
    } else {
      std::fprintf(out, " %9s %6s", "", "");
    }
  }
}

// "#   raw out-of-place, median/p90 us: ring 55.1/70.2  ring_chunked ...  (best: ring)"
void PrintRawLine(FILE* out, const char* half, const Half& h) {
  if (!h.present || h.raw.empty()) return;
  std::fprintf(out, "#   raw %s, median/p90 (us):", half);
  for (const auto& r : h.raw) {
    std::fprintf(out, "  %s %.1f/%.1f", r.name.c_str(), r.t.median, r.t.p90);
    if (r.ours && h.ours && r.t.median > 0) {
      std::fprintf(out, " (ours / this %.3f)", h.t.median / r.t.median);
    }
  }
  if (const RawResult* best = h.BestRaw()) std::fprintf(out, "  (best: %s)", best->name.c_str());
  std::fprintf(out, "\n");
}

}  // namespace

double Report::AvgBusBw() const {
  double sum = 0;
  int n = 0;
  for (const auto& row : rows) {
    for (const Half* h : {&row.oop, &row.ip}) {
      if (h->present && h->ours) {
        sum += h->busbw;
        ++n;
      }
    }
  }
  return n ? sum / n : 0;
}

int64_t Report::TotalWrong() const {
  int64_t w = coalesce.present ? coalesce.wrong : 0;
  for (const auto& row : rows) {
    for (const Half* h : {&row.oop, &row.ip}) {
      if (h->present && h->wrong > 0) w += h->wrong;
    }
  }
  return w;
}

void PrintHeader(FILE* out, const Report& r) {
  std::fprintf(out,
               "# comm_bench: backend %s, %d rank(s), %s mode, iters %d x %d round(s), "
               "warmup %d%s%s\n",
               r.backend.c_str(), r.world, r.mode.c_str(), r.iters, r.rounds, r.warmup,
               r.baseline ? ", baseline " : "", r.baseline ? r.baseline_name.c_str() : "");
  std::fprintf(out, "# host %s\n", r.host.c_str());
  std::fprintf(out,
               "# time = mean per op (nccl-tests), median and p90 of %s, averaged over ranks%s\n#\n",
               r.mode == "sync" ? "every op's own time" : "the rounds' mean times",
               r.baseline ? "; best = the raw engine with the lowest median, ratio = our median "
                            "/ best median"
                          : "");
  if (!r.table) return;
  const char* raw = r.baseline ? "      best  ratio" : "";
  // The two halves' titles, centred over their columns.
  const int half_width = r.baseline ? 74 : 57;
  auto centred = [&](const std::string& t) {
    int pad = (half_width - 2 - static_cast<int>(t.size())) / 2;
    std::string dashes(static_cast<size_t>(pad - 1), '-');
    std::string s = "  " + dashes + " " + t + " " + dashes;
    s.resize(static_cast<size_t>(half_width), '-');
    return s;
  };
  std::fprintf(out, "# %61s%s%s\n", "", centred("out-of-place").c_str(),
               centred("in-place").c_str());
  std::fprintf(out,
               "# %-13s %12s %12s %8s %6s %5s  %9s %9s %9s %7s %7s %6s%s  %9s %9s %9s %7s %7s "
               "%6s%s\n",
               "op", "size", "count", "type", "redop", "root", "time", "median", "p90", "algbw",
               "busbw", "#wrong", raw, "time", "median", "p90", "algbw", "busbw", "#wrong", raw);
  const char* rawu = r.baseline ? "      (us)   (x)" : "";
  std::fprintf(out,
               "# %-13s %12s %12s %8s %6s %5s  %9s %9s %9s %7s %7s %6s%s  %9s %9s %9s %7s %7s "
               "%6s%s\n",
               "", "(B)", "(elements)", "", "", "", "(us)", "(us)", "(us)", "(GB/s)", "(GB/s)", "",
               rawu, "(us)", "(us)", "(us)", "(GB/s)", "(GB/s)", "", rawu);
  std::fflush(out);
}

void PrintRow(FILE* out, const Report& r, const Row& row) {
  std::fprintf(out, "  %-13s %12lld %12lld %8s %6s %5d", row.op.c_str(),
               static_cast<long long>(row.bytes), static_cast<long long>(row.count),
               row.type.c_str(), row.redop.c_str(), row.root);
  PrintHalf(out, row.oop, r.baseline);
  PrintHalf(out, row.ip, r.baseline);
  std::fprintf(out, "\n");
  PrintRawLine(out, "out-of-place", row.oop);
  PrintRawLine(out, "in-place", row.ip);
  std::fflush(out);
}

void PrintCoalesce(FILE* out, const CoalesceResult& c) {
  std::fprintf(out,
               "# Coalescing: %d x %lld B allreduce: one by one %.1f us, coalesced %.1f us, "
               "speedup %.2fx, #wrong %lld\n",
               c.ops, static_cast<long long>(c.bytes), c.one_by_one_us, c.coalesced_us,
               c.coalesced_us > 0 ? c.one_by_one_us / c.coalesced_us : 0.0,
               static_cast<long long>(c.wrong));
  std::fflush(out);
}

void PrintFooter(FILE* out, const Report& r) {
  for (const auto& n : r.notes) std::fprintf(out, "# %s\n", n.c_str());
  int64_t wrong = r.TotalWrong();
  std::fprintf(out, "# Out of bounds values : %lld %s\n", static_cast<long long>(wrong),
               wrong == 0 ? "OK" : "FAILED");
  std::fprintf(out, "# Avg bus bandwidth    : %.4f\n#\n", r.AvgBusBw());
  std::fflush(out);
}

bool WriteCsv(const std::string& path, const Report& r) {
  std::ofstream f(path);
  if (!f) {
    std::fprintf(stderr, "comm_bench: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
    return false;
  }
  f << "op,size_bytes,count,type,redop,root,backend,world_size,mode,"
       "oop_time_us,oop_median_us,oop_p90_us,oop_algbw_gbps,oop_busbw_gbps,oop_wrong,"
       "oop_best_raw,oop_best_raw_median_us,oop_best_raw_p90_us,"
       "ip_time_us,ip_median_us,ip_p90_us,ip_algbw_gbps,ip_busbw_gbps,ip_wrong,"
       "ip_best_raw,ip_best_raw_median_us,ip_best_raw_p90_us\n";
  auto half = [&](const Half& h) {
    std::string s = ",,,,,";
    if (h.present && h.ours) {
      s = Num(h.t.mean, 3) + "," + Num(h.t.median, 3) + "," + Num(h.t.p90, 3) + "," +
          Num(h.algbw, 4) + "," + Num(h.busbw, 4) + "," +
          (h.wrong < 0 ? "" : std::to_string(h.wrong));
    }
    const RawResult* best = h.present ? h.BestRaw() : nullptr;
    if (best == nullptr) return s + ",,,";
    return s + "," + best->name + "," + Num(best->t.median, 3) + "," + Num(best->t.p90, 3);
  };
  for (const auto& row : r.rows) {
    f << row.op << "," << row.bytes << "," << row.count << "," << row.type << "," << row.redop
      << "," << row.root << "," << r.backend << "," << r.world << "," << r.mode << ","
      << half(row.oop) << "," << half(row.ip) << "\n";
  }
  return static_cast<bool>(f);
}

bool WriteJson(const std::string& path, const Report& r) {
  std::ofstream f(path);
  if (!f) {
    std::fprintf(stderr, "comm_bench: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
    return false;
  }
  f << "{\n  \"backend\": " << JsonString(r.backend) << ",\n  \"world_size\": " << r.world
    << ",\n  \"mode\": " << JsonString(r.mode) << ",\n  \"iters\": " << r.iters
    << ",\n  \"rounds\": " << r.rounds << ",\n  \"warmup\": " << r.warmup << ",\n  \"host\": " << JsonString(r.host)
    << ",\n  \"baseline\": " << (r.baseline ? JsonString(r.baseline_name) : "null")
    << ",\n  \"results\": [";
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const Row& row = r.rows[i];
    f << (i ? "," : "") << "\n    {\"op\": " << JsonString(row.op) << ", \"size_bytes\": "
      << row.bytes << ", \"count\": " << row.count << ", \"type\": " << JsonString(row.type)
      << ", \"redop\": " << JsonString(row.redop) << ", \"root\": " << row.root
      << ",\n     \"out_of_place\": " << JsonHalf(row.oop)
      << ",\n     \"in_place\": " << JsonHalf(row.ip) << "}";
  }
  f << "\n  ],\n  \"coalesce\": ";
  if (r.coalesce.present) {
    const auto& c = r.coalesce;
    f << "{\"ops\": " << c.ops << ", \"bytes_per_op\": " << c.bytes
      << ", \"one_by_one_us\": " << Num(c.one_by_one_us, 3)
      << ", \"coalesced_us\": " << Num(c.coalesced_us, 3) << ", \"speedup\": "
      << Num(c.coalesced_us > 0 ? c.one_by_one_us / c.coalesced_us : 0, 4)
      << ", \"wrong\": " << c.wrong << "}";
  } else {
    f << "null";
  }
  f << ",\n  \"avg_busbw_gbps\": " << Num(r.AvgBusBw(), 4)
    << ",\n  \"wrong_total\": " << r.TotalWrong() << "\n}\n";
  return static_cast<bool>(f);
}

bool WritePlot(const std::string& path, const Report& r) {
  if (tools::FindGnuplot().empty()) {
    std::printf("# --plot: gnuplot not found (Debian: apt-get install gnuplot-nox); no %s\n",
                path.c_str());
    return true;
  }
  // One data block per op (out-of-place busbw), separated by two blank lines (gnuplot index).
  std::map<std::string, std::vector<const Row*>> by_op;
  std::vector<std::string> order;
  for (const auto& row : r.rows) {
    if (!by_op.count(row.op)) order.push_back(row.op);
    by_op[row.op].push_back(&row);
  }
  if (order.empty()) {
    std::printf("# --plot: no size sweep to plot\n");
    return true;
  }
  std::ostringstream s;
  s << "set terminal pngcairo noenhanced size 1000,640\n"
    << "set output " << JsonString(path) << "\n"
    << "set title " << JsonString("comm_bench: " + r.backend + ", " + std::to_string(r.world) +
                                  " ranks, " + r.mode + " (out-of-place busbw)")
    << "\nset logscale x 2\nset xlabel 'size (bytes)'\nset ylabel 'busbw (GB/s)'\n"
    << "set key left top\nset grid\nset format x '%.0b %BB'\n"
    << "$data << EOD\n";
  for (const auto& op : order) {
    for (const Row* row : by_op[op]) {
      s << row->bytes << " " << row->oop.busbw << " " << (row->ip.present ? row->ip.busbw : 0)
        << "\n";
    }
    s << "\n\n";
  }
  s << "EOD\nplot ";
  for (size_t i = 0; i < order.size(); ++i) {
    s << (i ? ", " : "") << "$data index " << i << " using 1:2 with linespoints title "
      << JsonString(order[i]);
  }
  s << "\n";
  std::string error;
  if (!tools::RunGnuplot(s.str(), &error)) {
    std::fprintf(stderr, "comm_bench: %s; no %s\n", error.c_str(), path.c_str());
    return false;
  }
  std::printf("# plot written to %s\n", path.c_str());
  return true;
}

}  // namespace bench
}  // namespace paddle_like
