#include "phi/core/stream.h"

#include <atomic>

namespace phi {

namespace {
std::atomic<uint64_t> g_next_stream_id{1};
}

Stream::Stream() : id_(g_next_stream_id.fetch_add(1)) {}

std::string Stream::DebugString() const {
  return "Stream(" + std::to_string(id_) + ", " + place().DebugString() + ")";
}

}  // namespace phi
