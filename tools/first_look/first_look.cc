// The README's "first look": data-parallel style use of paddle_like::dist on N processes.
//
//   build/tools/launch/launch --nproc_per_node 4 -- build/tools/first_look/first_look
//
// Each rank averages a "gradient" with the others (async, overlapping other work), builds a
// subgroup of the even ranks, and checks every result against what it must be. Exits 1 on
// a wrong value.
#include <cstdio>
#include <vector>

#include "paddle_like/dist/distributed.h"

namespace dist = paddle_like::dist;

int main() {
  dist::init_process_group();  // env:// (set by tools/launch), backend "cpu:gloo[,cuda:nccl]"
  const int rank = dist::get_rank(), world = dist::get_world_size();

  // A gradient of 1024 values; rank r contributes r + 1 everywhere.
  phi::DenseTensor grad(phi::CPUPlace(), phi::DataType::FLOAT32, phi::DDim({1024}));
  phi::Fill(&grad, rank + 1.0);
  auto work = dist::all_reduce(&grad, dist::ReduceOp::AVG, {nullptr, /*async_op=*/true});
  // ... backward would go on here while the all-reduce runs ...
  work->wait();  // raises a typed error naming group, op and sequence number on failure

  std::vector<int> evens;
  for (int r = 0; r < world; r += 2) evens.push_back(r);
  auto even_group = dist::new_group(evens);  // every rank calls it, members or not
  phi::DenseTensor token = phi::DenseTensor::FromVector(std::vector<int64_t>{rank});
  dist::broadcast(&token, evens.back(), {even_group, false});  // a no-op on odd ranks

  const float want = (world + 1) / 2.0f;
  bool ok = grad.data<float>()[1023] == want;
  if (even_group->is_member()) ok &= token.data<int64_t>()[0] == evens.back();
  std::printf("rank %d/%d: average %.2f (expect %.2f), even-group token %lld: %s\n", rank, world,
              grad.data<float>()[0], want, static_cast<long long>(token.data<int64_t>()[0]),
              ok ? "ok" : "WRONG");
  dist::barrier();
  dist::destroy_process_group();
  return ok ? 0 : 1;
}
