#include "phi/core/distributed/comm_context.h"

#include <glog/logging.h>

#include "phi/core/errors.h"

namespace phi {
namespace distributed {

const char* CommContext::VariableAllGather(const void*, size_t, size_t*, std::vector<size_t>*,
                                           Stream*) {
  PADDLE_THROW(errors::Unimplemented("%s offers no variable-size all-gather",
                                     BackendName().c_str()));
}

void CommContext::Gather(const void*, void*, int64_t, DataType, int, Stream*) {
  PADDLE_THROW(errors::Unimplemented("%s has no native gather", BackendName().c_str()));
}

void CommContext::Scatter(const void*, void*, int64_t, DataType, int, Stream*) {
  PADDLE_THROW(errors::Unimplemented("%s has no native scatter", BackendName().c_str()));
}

void CommContext::PostSend(const void*, int64_t, DataType, int, int, P2PDone) {
  PADDLE_THROW(errors::Unimplemented("%s does not post point-to-point ops",
                                     BackendName().c_str()));
}

void CommContext::PostRecv(void*, int64_t, DataType, int, int, int*, P2PDone) {
  PADDLE_THROW(errors::Unimplemented("%s does not post point-to-point ops",
                                     BackendName().c_str()));
}

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
