// A job that hangs the way real ones do. Every rank runs all-reduces; at op --at the rank
// --rank (default 2 at 3) misbehaves (--mode): "skip" (it does not call that one and sleeps),
// "stall" (it stops itself with SIGSTOP: alive, sockets open, silent), or "kill" (SIGKILL).
// The others issue the op asynchronously and nobody waits on it: their watchdogs must end
// them and name the rank. Used by tests/tools/fr_trace_test.cc and tools/hang_trials.sh.
#include <signal.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "paddle_like/dist/distributed.h"

namespace dist = paddle_like::dist;

int main(int argc, char** argv) {
  int bad_rank = 2, at = 3;
  std::string mode = "skip";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rank")) bad_rank = std::stoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--at")) at = std::stoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--mode")) mode = argv[i + 1];
  }
  dist::InitOptions o;
  o.backend = "gloo";
  o.timeout = std::chrono::milliseconds(1500);
  dist::init_process_group(o);
  const bool me = dist::get_rank() == bad_rank;
  for (int i = 0; i < at; ++i) {
    auto t = phi::DenseTensor::FromVector<float>({1.f});
    dist::all_reduce(&t);
  }
  if (me && mode == "kill") ::raise(SIGKILL);
  if (me && mode == "stall") ::raise(SIGSTOP);
  auto t = phi::DenseTensor::FromVector<float>(std::vector<float>(256, 1.f));
  dist::WorkPtr pending;
  if (!me) pending = dist::all_reduce(&t, dist::ReduceOp::SUM, {nullptr, true});
  std::this_thread::sleep_for(std::chrono::seconds(20));  // the watchdog ends this sooner
  return 0;
}
