#include "phi/core/distributed/store/hash_store.h"

#include "phi/core/distributed/store/store_utils.h"
#include "phi/core/errors.h"

namespace phi {
namespace distributed {

void HashStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    data_[key] = value;
  }
  cv_.notify_all();
}

void HashStore::WaitLocked(std::unique_lock<std::mutex>& lock,
                           const std::vector<std::string>& keys,
                           std::chrono::milliseconds timeout, const char* op) {
  const auto started = std::chrono::steady_clock::now();
  auto all_present = [&] {
    for (const auto& k : keys) {
      if (!data_.count(k)) return false;
    }
    return true;
  };
  if (cv_.wait_until(lock, started + timeout, all_present)) return;
  std::vector<std::string> missing;
  for (const auto& k : keys) {
    if (!data_.count(k)) missing.push_back(k);
  }
  store_utils::ThrowTimeout("HashStore", op, missing, timeout, started);
}

std::vector<uint8_t> HashStore::get(const std::string& key) {
  std::unique_lock<std::mutex> lock(mu_);
  WaitLocked(lock, {key}, timeout_, "get");
  return data_.at(key);
}

int64_t HashStore::add(const std::string& key, int64_t value) {
  int64_t sum;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = data_.find(key);
    int64_t cur = it == data_.end() ? 0 : store_utils::ParseCounter("HashStore", key, it->second);
    sum = store_utils::CheckedAdd("HashStore", key, cur, value);
    data_[key] = store_utils::EncodeCounter(sum);
  }
  cv_.notify_all();
  return sum;
}

std::vector<uint8_t> HashStore::compare_set(const std::string& key,
                                            const std::vector<uint8_t>& expected,
                                            const std::vector<uint8_t>& desired) {
  std::vector<uint8_t> now;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = data_.find(key);
    bool match = it == data_.end() ? expected.empty() : it->second == expected;
    if (!match) return it == data_.end() ? std::vector<uint8_t>() : it->second;
    data_[key] = desired;
    now = desired;
  }
  cv_.notify_all();
  return now;
}

void HashStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  WaitLocked(lock, keys, timeout, "wait");
}

bool HashStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& k : keys) {
    if (!data_.count(k)) return false;
  }
  return true;
}

bool HashStore::delete_key(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return data_.erase(key) > 0;
}

int64_t HashStore::num_keys() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(data_.size());
}

void HashStore::append(const std::string& key, const std::vector<uint8_t>& value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& v = data_[key];
    v.insert(v.end(), value.begin(), value.end());
  }
  cv_.notify_all();
}

std::vector<std::vector<uint8_t>> HashStore::multi_get(const std::vector<std::string>& keys) {
  std::unique_lock<std::mutex> lock(mu_);
  WaitLocked(lock, keys, timeout_, "multi_get");
  std::vector<std::vector<uint8_t>> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(data_.at(k));
  return out;
}

void HashStore::multi_set(const std::vector<std::string>& keys,
                          const std::vector<std::vector<uint8_t>>& values) {
  PADDLE_ENFORCE_EQ(keys.size(), values.size(),
                    errors::InvalidArgument("HashStore: multi_set needs one value per key"));
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < keys.size(); ++i) data_[keys[i]] = values[i];
  }
  cv_.notify_all();
}

}  // namespace distributed
}  // namespace phi
