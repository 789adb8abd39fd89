#include "phi/core/distributed/comm_context.h"

#include <glog/logging.h>

namespace phi {
namespace distributed {

CommGroupGuard::~CommGroupGuard() {
  if (ended_) return;
  try {
    comm_->GroupAbort();
  } catch (const std::exception& e) {
    // Already unwinding from the first error; that one is what the caller must see.
    LOG(WARNING) << comm_->BackendName() << ": closing the group after an error failed too: "
                 << e.what();
  }
}

}  // namespace distributed
}  // namespace phi
