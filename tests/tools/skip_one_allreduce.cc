// A job that hangs the way real ones do. Every rank runs all-reduces; at op --at the rank
// --rank (default 2 at 3) misbehaves (--mode): "skip" (it does not call that one and sleeps),
// "stall" (it stops itself with SIGSTOP: alive, sockets open, silent), or "kill" (SIGKILL).
// The others issue the op asynchronously and nobody waits on it: their watchdogs must end
// them and name the rank. With --mixed 1, every rank first runs ops whose arguments
// legitimately differ per rank (a scatter and a gather, whose lists exist on the root only,
// an all-to-all with unequal splits) and ranks 0 and 1 exchange messages the others take no
// part in: none of that is a divergence. Used by tests/tools/fr_trace_test.cc and
// tools/hang_trials.sh.
#include <signal.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "paddle_like/dist/distributed.h"

namespace dist = paddle_like::dist;

void RunOpsThatDifferPerRank() {
  const int rank = dist::get_rank(), n = dist::get_world_size();
  std::vector<phi::DenseTensor> list;
  if (rank == 0) {
    for (int r = 0; r < n; ++r) list.push_back(phi::DenseTensor::FromVector<float>({1.f, 2.f}));
  }
  auto part = phi::DenseTensor::FromVector<float>({0.f, 0.f});
  dist::scatter(&part, list, /*src=*/0);
  std::vector<phi::DenseTensor> gathered;
  dist::gather(part, &gathered, /*dst=*/1);
  // Rank r sends r + j + 1 elements to rank j, so every rank moves a different total.
  std::vector<int64_t> splits;
  int64_t total = 0;
  for (int j = 0; j < n; ++j) total += splits.emplace_back(rank + j + 1);
  auto in = phi::DenseTensor::FromVector<float>(std::vector<float>(total, 1.f));
  auto out = phi::DenseTensor::FromVector<float>(std::vector<float>(total, 0.f));
  dist::all_to_all_single(&out, in, splits, splits);
  if (rank <= 1 && n > 1) {
    auto msg = phi::DenseTensor::FromVector<float>({3.f});
    for (int i = 0; i < 3; ++i) {
      if (rank == 0) {
        dist::send(msg, 1);
        dist::recv(&msg, 1);
      } else {
        dist::recv(&msg, 0);
        dist::send(msg, 0);
      }
    }
  }
}

int main(int argc, char** argv) {
  int bad_rank = 2, at = 3;
  std::string mode = "skip";
  bool mixed = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rank")) bad_rank = std::stoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--at")) at = std::stoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--mode")) mode = argv[i + 1];
    else if (!std::strcmp(argv[i], "--mixed")) mixed = std::stoi(argv[i + 1]) != 0;
  }
  dist::InitOptions o;
  o.backend = "gloo";
  o.timeout = std::chrono::milliseconds(1500);
  dist::init_process_group(o);
  const bool me = dist::get_rank() == bad_rank;
  if (mixed) RunOpsThatDifferPerRank();
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
