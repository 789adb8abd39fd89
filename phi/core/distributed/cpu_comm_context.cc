#include "phi/core/distributed/cpu_comm_context.h"

#include "phi/core/errors.h"

namespace phi {
namespace distributed {

CpuCommContext::CpuCommContext(int rank, int size, const char* engine, std::string describe)
    : CommContext(rank, size), engine_(engine), describe_(std::move(describe)) {}

void CpuCommContext::AllReduce(const void* send, void* recv, int64_t count, DataType dtype,
                               const Reduction& red, Stream*) {
  if (group_.open()) {  // fused at the outermost GroupEnd
    group_.Add(PendingCpuAllReduce{send, recv, count, dtype, red});
    return;
  }
  RunAllReduce(send, recv, count, dtype, red);
}

void CpuCommContext::RunAllReduce(const void* send, void* recv, int64_t count, DataType dtype,
                                  const Reduction& red) {
  ThrowIfBroken();
  if (count == 0) return;
  PreparedReduction p = PrepareReduction(send, count, dtype, red);
  if (!AllReducePrepared(p.in.data, recv, p.in.count, p.in.dtype, p.op)) {
    FinishReduction(red, p.in.dtype, recv, p.in.count);
  }
}

void CpuCommContext::GroupEnd() {
  // The batch is taken first, so that a failure below leaves the context clean.
  std::vector<PendingCpuAllReduce> allreduces;
  std::vector<PendingCpuP2P> p2p;
  if (!group_.End(engine_, &allreduces, &p2p)) return;  // nested
  if (!p2p.empty()) RunP2PBatch(p2p);
  RunFusedCpuAllReduces(allreduces, [this](const void* send, void* recv, int64_t count,
                                           DataType dtype, const Reduction& red) {
    RunAllReduce(send, recv, count, dtype, red);
  });
}

void CpuCommContext::Abort(const std::string& why) {
  MarkBroken("aborted: " + why);
  WakeOnAbort(why);
}

bool CpuCommContext::DeferToGroup(const PendingCpuP2P& op) {
  if (!group_.open()) return false;
  group_.Add(op);
  return true;
}

CpuCommContext::PreparedReduction CpuCommContext::PrepareReduction(const void* send,
                                                                    int64_t count,
                                                                    DataType dtype,
                                                                    const Reduction& red) const {
  return PreparedReduction{PrepareCpuReduce(send, count, dtype, red),
                           red.op == ReduceOp::PREMUL_SUM ? ReduceOp::SUM : red.op};
}

void CpuCommContext::FinishReduction(const Reduction& red, DataType real_dtype, void* out,
                                     int64_t count) const {
  if (red.op == ReduceOp::AVG) CpuDivide(real_dtype, out, count, GetSize());
}

void CpuCommContext::MarkBroken(const std::string& why) {
  std::lock_guard<std::mutex> lk(broken_mu_);
  if (broken_.empty()) broken_ = why;
  is_broken_.store(true, std::memory_order_release);
}

void CpuCommContext::ThrowIfBroken() const {
  if (!is_broken_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lk(broken_mu_);
  PADDLE_ENFORCE(broken_.empty(),
                 errors::Unavailable("%s is unusable after an earlier failure; destroy the "
                                     "group and create a new one. The failure: %s",
                                     describe_.c_str(), broken_.c_str()));
}

std::string CpuCommContext::Broken() const {
  std::lock_guard<std::mutex> lk(broken_mu_);
  return broken_;
}

}  // namespace distributed
}  // namespace phi
