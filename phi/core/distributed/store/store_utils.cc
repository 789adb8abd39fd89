#include "phi/core/distributed/store/store_utils.h"

#include <cerrno>
#include <cstdlib>

#include "phi/core/errors.h"

namespace phi {
namespace distributed {
namespace store_utils {

int64_t ParseCounter(const std::string& store, const std::string& key,
                     const std::vector<uint8_t>& value) {
  std::string s(value.begin(), value.end());
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || errno != 0 || end != s.c_str() + s.size()) {
    PADDLE_THROW(errors::InvalidArgument("%s: add on key '%s': its value '%s' is not an integer",
                                         store.c_str(), key.c_str(), s.substr(0, 64).c_str()));
  }
  return x;
}

int64_t CheckedAdd(const std::string& store, const std::string& key, int64_t a, int64_t b) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) {
    PADDLE_THROW(errors::OutOfRange("%s: add on key '%s' overflows int64", store.c_str(),
                                    key.c_str()));
  }
  return sum;
}

std::vector<uint8_t> EncodeCounter(int64_t v) {
  std::string s = std::to_string(v);
  return std::vector<uint8_t>(s.begin(), s.end());
}

std::string KeyList(const std::vector<std::string>& keys) {
  std::string s;
  for (size_t i = 0; i < keys.size(); ++i) s += (i ? ", '" : "'") + keys[i] + "'";
  return s;
}

void ThrowTimeout(const std::string& store, const char* op,
                  const std::vector<std::string>& missing, std::chrono::milliseconds timeout,
                  std::chrono::steady_clock::time_point started) {
  auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - started)
                     .count();
  PADDLE_THROW(errors::Timeout("%s: %s timed out after %lld ms (timeout %lld ms) waiting for "
                               "key(s) %s",
                               store.c_str(), op, static_cast<long long>(elapsed),
                               static_cast<long long>(timeout.count()),
                               KeyList(missing).c_str()));
}

}  // namespace store_utils
}  // namespace distributed
}  // namespace phi
