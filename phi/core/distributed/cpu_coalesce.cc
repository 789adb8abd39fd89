#include "phi/core/distributed/cpu_coalesce.h"

#include <cstring>

#include "phi/core/errors.h"

namespace phi {
namespace distributed {

void RunFusedCpuAllReduces(const std::vector<PendingCpuAllReduce>& ops,
                           const CpuAllReduceFn& all_reduce) {
  if (ops.empty()) return;
  if (ops.size() == 1) {
    const auto& o = ops[0];
    all_reduce(o.send, o.recv, o.count, o.dtype, o.red);
    return;
  }
  std::vector<bool> done(ops.size(), false);
  for (size_t i = 0; i < ops.size(); ++i) {
    if (done[i]) continue;
    std::vector<size_t> bucket;
    int64_t total = 0;
    for (size_t j = i; j < ops.size(); ++j) {
      if (!done[j] && ops[j].dtype == ops[i].dtype && ops[j].red.op == ops[i].red.op &&
          ops[j].red.premul_factor == ops[i].red.premul_factor) {
        bucket.push_back(j);
        done[j] = true;
        total += ops[j].count;
      }
    }
    const size_t es = SizeOf(ops[i].dtype);
    std::vector<char> flat(static_cast<size_t>(total) * es);
    size_t off = 0;
    for (size_t j : bucket) {
      const size_t b = static_cast<size_t>(ops[j].count) * es;
      if (b) std::memcpy(flat.data() + off, ops[j].send, b);
      off += b;
    }
    all_reduce(flat.data(), flat.data(), total, ops[i].dtype, ops[i].red);
    off = 0;
    for (size_t j : bucket) {
      const size_t b = static_cast<size_t>(ops[j].count) * es;
      if (b) std::memcpy(ops[j].recv, flat.data() + off, b);
      off += b;
    }
  }
}

void ThrowGroupEndWithoutStart(const char* engine) {
  PADDLE_THROW(errors::PreconditionNotMet("%s GroupEnd without GroupStart.", engine));
}

}  // namespace distributed
}  // namespace phi
