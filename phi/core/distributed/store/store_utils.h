// Small helpers the Store implementations share: the decimal-integer encoding add() uses
// (the same as Paddle's and c10d's stores, so values read back as text) and the
// timeout message every store raises.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace phi {
namespace distributed {
namespace store_utils {

// Parses the value add() stored; raises phi::InvalidArgumentError naming the key otherwise.
int64_t ParseCounter(const std::string& store, const std::string& key,
                     const std::vector<uint8_t>& value);
// Sum, raising phi::OutOfRangeError on int64 overflow.
int64_t CheckedAdd(const std::string& store, const std::string& key, int64_t a, int64_t b);
std::vector<uint8_t> EncodeCounter(int64_t v);
// "'a', 'b'"
std::string KeyList(const std::vector<std::string>& keys);
[[noreturn]] void ThrowTimeout(const std::string& store, const char* op,
                               const std::vector<std::string>& missing,
                               std::chrono::milliseconds timeout,
                               std::chrono::steady_clock::time_point started);

}  // namespace store_utils
}  // namespace distributed
}  // namespace phi
