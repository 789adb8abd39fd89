// The rendezvous key-value store every process group bootstraps through.
//
// Keys are strings, values are bytes. get() and wait() block until the keys exist or the
// store's timeout passes, then raise phi::TimeoutError naming the keys.
#pragma once

#include <chrono>
#include <memory>
#include <cstdint>
#include <string>
#include <vector>

namespace phi {
namespace distributed {

class Store {
 public:
  static constexpr std::chrono::milliseconds kDefaultTimeout = std::chrono::seconds(300);

  explicit Store(std::chrono::milliseconds timeout = kDefaultTimeout) : timeout_(timeout) {}
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  virtual void set(const std::string& key, const std::vector<uint8_t>& value) = 0;
  // Waits up to timeout() for the key.
  virtual std::vector<uint8_t> get(const std::string& key) = 0;
  // Atomically adds `value` to the integer stored at key (0 if absent); returns the sum.
  virtual int64_t add(const std::string& key, int64_t value) = 0;
  // Sets key to desired if its current value equals expected (an absent key matches an
  // empty expected). Returns the value now stored.
  virtual std::vector<uint8_t> compare_set(const std::string& key,
                                           const std::vector<uint8_t>& expected,
                                           const std::vector<uint8_t>& desired) = 0;
  virtual void wait(const std::vector<std::string>& keys,
                    std::chrono::milliseconds timeout) = 0;
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }
  // True when every key exists; never blocks.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  virtual bool delete_key(const std::string& key) = 0;
  virtual int64_t num_keys() = 0;
  virtual void append(const std::string& key, const std::vector<uint8_t>& value) = 0;
  virtual std::vector<std::vector<uint8_t>> multi_get(const std::vector<std::string>& keys) = 0;
  virtual void multi_set(const std::vector<std::string>& keys,
                         const std::vector<std::vector<uint8_t>>& values) = 0;

  // A store on the same keys with a connection of its own (c10d's clone()), for a
  // background thread whose waits must not queue behind other users' requests (a client
  // serializes requests on its connection), nor hold theirs up. nullptr when this store has
  // no connection to duplicate (in-process and file stores): share this one then.
  virtual std::shared_ptr<Store> Clone() { return nullptr; }

  // Sets `key` to `value` when this store's connection closes, whatever the reason (the
  // process ended, or closed it); cancelled by CancelSetOnClose. How the liveness service
  // learns at once that a process ended (phi/core/distributed/liveness.h). Returns false
  // where the store has no connection of its own (in-process and file stores).
  virtual bool SetOnClose(const std::string& key, const std::vector<uint8_t>& value) {
    (void)key;
    (void)value;
    return false;
  }
  virtual void CancelSetOnClose(const std::string& key) { (void)key; }

  virtual void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Convenience for string values.
  void set(const std::string& key, const std::string& value) {
    set(key, std::vector<uint8_t>(value.begin(), value.end()));
  }
  std::string get_string(const std::string& key) {
    auto v = get(key);
    return std::string(v.begin(), v.end());
  }

 protected:
  std::chrono::milliseconds timeout_;
};

}  // namespace distributed
}  // namespace phi
