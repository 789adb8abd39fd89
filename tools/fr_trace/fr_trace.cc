// fr_trace: reads the flight-recorder dumps of every rank (written by the comm watchdog on a
// timeout, on SIGUSR1, or by distributed::DumpFlightRecorders) and prints, per group, the
// first sequence number where the ranks diverge and how.
//
//   fr_trace DIR        # DIR = FLAGS_comm_dump_dir of the job
#include <cstdio>
#include <exception>
#include <string>

#include "tools/common/fr_analysis.h"

int main(int argc, char** argv) {
  if (argc != 2 || std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help") {
    std::fprintf(argc == 2 ? stdout : stderr,
                 "usage: fr_trace DIR\n"
                 "Compares the flight-recorder dumps fr_g<gid>_r<rank>.txt in DIR (the job's\n"
                 "FLAGS_comm_dump_dir) and prints the first divergence of every group.\n");
    return argc == 2 ? 0 : 2;
  }
  try {
    std::fputs(paddle_like::tools::AnalyzeFlightRecorderDumps(argv[1]).c_str(), stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fr_trace: %s\n", e.what());
    return 1;
  }
}
