// HashStore: an in-process Store (threads of one process, or tests). A mutex guards the
// map and one condition variable wakes every waiter on each write; waiters re-check their
// keys, so a wake-up can never be lost.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "phi/core/distributed/store/store.h"

namespace phi {
namespace distributed {

class HashStore : public Store {
 public:
  explicit HashStore(std::chrono::milliseconds timeout = kDefaultTimeout) : Store(timeout) {}

  using Store::set;
  using Store::wait;
  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  std::vector<uint8_t> compare_set(const std::string& key, const std::vector<uint8_t>& expected,
                                   const std::vector<uint8_t>& desired) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  void append(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<std::vector<uint8_t>> multi_get(const std::vector<std::string>& keys) override;
  void multi_set(const std::vector<std::string>& keys,
                 const std::vector<std::vector<uint8_t>>& values) override;

 private:
  // Waits (lock held) until all keys exist; raises phi::TimeoutError naming the missing.
  void WaitLocked(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                  std::chrono::milliseconds timeout, const char* op);

  std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<std::string, std::vector<uint8_t>> data_;
};

}  // namespace distributed
}  // namespace phi
