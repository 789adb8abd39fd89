// merge_traces: merges the ranks' comm timelines (trace_<pid>.json, written with
// FLAGS_comm_trace_dir; one event per line) into one Chrome/Perfetto trace, and optionally
// renders it as a PNG (gnuplot): one row per rank and track (compute, comm of each group),
// a bar per event.
//
//   merge_traces DIR [-o merged.json] [--png timeline.png] [--from_ms A --to_ms B | --last_ms N]
#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tools/common/arg_parser.h"
#include "tools/common/gnuplot.h"

namespace paddle_like {
namespace tools {
namespace {

const char* kUsage =
    "usage: merge_traces DIR [-o FILE] [--png FILE] [--from_ms A] [--to_ms B]\n"
    "  DIR            the job's FLAGS_comm_trace_dir (trace_*.json, one per rank)\n"
    "  -o FILE        the merged trace (default DIR/merged_trace.json; open it in\n"
    "                 chrome://tracing or ui.perfetto.dev)\n"
    "  --png FILE     also draw the timeline (needs gnuplot)\n"
    "  --from_ms/--to_ms  the window of the PNG, in ms from the first event\n"
    "  --last_ms N    the window of the PNG: the last N ms\n";

// The value of "key": in a one-line JSON event (numbers and strings only).
std::string Field(const std::string& line, const std::string& key) {
  std::string pat = "\"" + key + "\": ";
  size_t at = line.find(pat);
  if (at == std::string::npos) return "";
  at += pat.size();
  if (line[at] == '"') {
    size_t end = line.find('"', at + 1);
    return line.substr(at + 1, end - at - 1);
  }
  size_t end = line.find_first_of(",}", at);
  return line.substr(at, end - at);
}

struct Bar {
  std::string row;  // "rank 0 compute", "rank 0 comm g0"
  double start_us, end_us;
  bool comm;
};

int Run(int argc, char** argv) {
  ArgParser p(argc, argv, "merge_traces", kUsage);
  std::string dir, out, png;
  double from_ms = 0, to_ms = -1, last_ms = -1;
  while (p.Next()) {
    const std::string& f = p.flag();
    if (f == "-h" || f == "--help") p.Help();
    else if (f == "-o") out = p.Value();
    else if (f == "--png") png = p.Value();
    else if (f == "--from_ms") from_ms = std::stod(p.Value());
    else if (f == "--to_ms") to_ms = std::stod(p.Value());
    else if (f == "--last_ms") last_ms = std::stod(p.Value());
    else if (!f.empty() && f[0] == '-') UsageError("merge_traces", kUsage, "unknown option " + f);
    else dir = p.arg();
  }
  if (dir.empty()) UsageError("merge_traces", kUsage, "no DIR");
  if (out.empty()) out = dir + "/merged_trace.json";
  std::vector<std::string> files;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n.rfind("trace_", 0) == 0 && n.size() > 5 && n.substr(n.size() - 5) == ".json") files.push_back(n);
    }
    ::closedir(d);
  }
  if (files.empty()) {
    std::fprintf(stderr, "merge_traces: no trace_*.json in %s\n", dir.c_str());
    return 1;
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> events;
  std::vector<Bar> bars;
  for (const auto& name : files) {
    std::ifstream f(dir + "/" + name);
    std::string line;
    while (std::getline(f, line)) {
      if (line.empty() || line[0] != '{' || line.rfind("{\"traceEvents\"", 0) == 0) continue;
      if (line.back() == ',') line.pop_back();
      events.push_back(line);
      if (Field(line, "ph") == "X") {
        double ts = std::stod(Field(line, "ts")), dur = std::stod(Field(line, "dur"));
        std::string tid = Field(line, "tid");
        bars.push_back({"rank " + Field(line, "pid") + " " + tid, ts, ts + dur, tid != "compute"});
      }
    }
  }
  {
    std::ofstream o(out);
    o << "{\"traceEvents\": [\n";
    for (size_t i = 0; i < events.size(); ++i) o << events[i] << (i + 1 < events.size() ? ",\n" : "\n");
    o << "]}\n";
  }
  std::printf("merge_traces: %zu events from %zu file(s) -> %s\n", events.size(), files.size(),
              out.c_str());
  if (png.empty()) return 0;
  double t0 = 1e300, t1 = 0;
  for (const auto& b : bars) {
    t0 = std::min(t0, b.start_us);
    t1 = std::max(t1, b.end_us);
  }
  if (last_ms > 0) {
    to_ms = (t1 - t0) / 1000;
    from_ms = std::max(0.0, to_ms - last_ms);
  }
  std::map<std::string, int> rows;
  for (const auto& b : bars) rows.emplace(b.row, 0);
  int y = 0;
  for (auto& [row, idx] : rows) idx = y++;
  std::ostringstream s;
  s << "set terminal pngcairo noenhanced size 1400," << 120 + 40 * rows.size()
    << "\nset output " << GnuplotString(png) << "\nset title 'comm timeline: compute and "
    << "comm-stream tasks per rank'\nset xlabel 'ms'\nset yrange [-1:" << rows.size()
    << "]\nset ytics (";
  bool first = true;
  for (auto& [row, idx] : rows) {
    s << (first ? "" : ", ") << GnuplotString(row) << " " << idx;
    first = false;
  }
  s << ")\nset grid x\n";
  if (to_ms > from_ms) s << "set xrange [" << from_ms << ":" << to_ms << "]\n";
  s << "$compute << EOD\n";
  for (const auto& b : bars) {
    if (!b.comm) s << (b.start_us - t0) / 1000 << " " << (b.end_us - t0) / 1000 << " " << rows[b.row] << "\n";
  }
  s << "EOD\n$comm << EOD\n";
  for (const auto& b : bars) {
    if (b.comm) s << (b.start_us - t0) / 1000 << " " << (b.end_us - t0) / 1000 << " " << rows[b.row] << "\n";
  }
  s << "EOD\nplot $compute using (($1+$2)/2):3:1:2:($3-0.35):($3+0.35) with boxxyerror "
       "fs solid 0.6 lc rgb '#4a90d9' title 'compute (forward, backward)', "
       "$comm using (($1+$2)/2):3:1:2:($3-0.35):($3+0.35) with boxxyerror fs solid 0.6 "
       "lc rgb '#e07b39' title 'comm stream'\n";
  std::string error;
  if (!RunGnuplot(s.str(), &error)) {
    std::fprintf(stderr, "merge_traces: %s\n", error.c_str());
    return 1;
  }
  std::printf("merge_traces: timeline -> %s\n", png.c_str());
  return 0;
}

}  // namespace
}  // namespace tools
}  // namespace paddle_like

int main(int argc, char** argv) { return paddle_like::tools::Run(argc, argv); }
