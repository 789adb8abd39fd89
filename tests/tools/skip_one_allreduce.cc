// A job that hangs the way real ones do: every rank runs three all-reduces, then rank 2
// skips the fourth (it sleeps instead) and nobody waits on it. Run under launch by
// tests/tools/fr_trace_test.cc: the other ranks' watchdogs must end them, naming rank 2.
#include <chrono>
#include <thread>

#include "paddle_like/dist/distributed.h"

namespace dist = paddle_like::dist;

int main() {
  dist::InitOptions o;
  o.backend = "gloo";
  o.timeout = std::chrono::milliseconds(1500);
  dist::init_process_group(o);
  for (int i = 0; i < 3; ++i) {
    auto t = phi::DenseTensor::FromVector<float>({1.f});
    dist::all_reduce(&t);
  }
  auto t = phi::DenseTensor::FromVector<float>(std::vector<float>(256, 1.f));
  dist::WorkPtr pending;
  if (dist::get_rank() != 2) pending = dist::all_reduce(&t, dist::ReduceOp::SUM, {nullptr, true});
  std::this_thread::sleep_for(std::chrono::seconds(20));  // the watchdog ends this sooner
  return 0;
}
