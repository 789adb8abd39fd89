// ProgressPoller: what a thread about to wait for an engine's posted ops can do instead of
// sleeping until the engine's own thread completes them (comm_context.h, P2PPoller).
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
  // off the work meanwhile.
  virtual void BeginPolling() = 0;
  virtual void EndPolling() = 0;
  // One turn at the engine's work, without sleeping; false when another thread has it.
  virtual bool Progress() = 0;
};

// Spins under `spin` (the spin rule) until ready(), serving `poller` meanwhile. Spin's
// verdict: false means block now (and call spin->Ended() once the wait is over).
template <typename Ready>
bool SpinServing(SpinPolicy* spin, ProgressPoller* poller, Ready&& ready) {
  struct Polling {
    ProgressPoller* p;
    explicit Polling(ProgressPoller* poller) : p(poller) { p->BeginPolling(); }
    ~Polling() { p->EndPolling(); }
  } polling(poller);
  return spin->Spin([&] { return ready() || (poller->Progress() && ready()); });
}

}  // namespace distributed
}  // namespace phi
