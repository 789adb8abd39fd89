// ProgressPoller and SpinServing (comm_context.h, P2PPoller).
#pragma once

#include "phi/core/distributed/spin_policy.h"

namespace phi {
namespace distributed {

// What a thread about to wait for an engine's posted ops can do instead of sleeping until
// the engine's own thread completes them: serve the engine's progress itself while it spins
// (Gloo: its point-to-point reactor), so that no thread needs waking when an op completes.
class ProgressPoller {
 public:
  virtual ~ProgressPoller() = default;
  // Around a spin of Progress calls (balanced; any thread): the engine's own thread keeps
  // off the work meanwhile. `blocking`: the caller now blocks on the ops it polled for, so
  // the engine's thread must take over at once; otherwise (the ops completed) it may stay
  // off a little longer, because a thread that polled for one op usually polls for the
  // next soon after (a loop of sync ops), and waking the engine's thread in between would
  // cost each op a wake-up.
  virtual void BeginPolling() = 0;
  virtual void EndPolling(bool blocking) = 0;
  // One turn at the engine's work, without sleeping; false when another thread has it.
  virtual bool Progress() = 0;
};

// Spins under `spin` (the spin rule) until ready(), serving `poller` meanwhile. Spin's
// verdict: false means block now (and call spin->Ended() once the wait is over).
template <typename Ready>
bool SpinServing(SpinPolicy* spin, ProgressPoller* poller, Ready&& ready) {
  struct Polling {
    ProgressPoller* p;
    bool blocking = true;  // unless the spin succeeds (an exception: nobody waits on)
    explicit Polling(ProgressPoller* poller) : p(poller) { p->BeginPolling(); }
    ~Polling() { p->EndPolling(blocking); }
  } polling(poller);
  const bool spun = spin->Spin([&] { return ready() || (poller->Progress() && ready()); });
  polling.blocking = !spun;
  return spun;
}

}  // namespace distributed
}  // namespace phi
