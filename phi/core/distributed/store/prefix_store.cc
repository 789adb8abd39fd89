#include "phi/core/distributed/store/prefix_store.h"

#include "phi/core/errors.h"

namespace phi {
namespace distributed {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> store)
    : Store(store ? store->timeout() : kDefaultTimeout),
      prefix_(std::move(prefix)),
      store_(std::move(store)) {
  PADDLE_ENFORCE_NOT_NULL(store_, errors::InvalidArgument(
                                      "PrefixStore('%s') needs a store to wrap", prefix_.c_str()));
}

std::vector<std::string> PrefixStore::Keys(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(Key(k));
  return out;
}

void PrefixStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  store_->set(Key(key), value);
}
std::vector<uint8_t> PrefixStore::get(const std::string& key) { return store_->get(Key(key)); }
int64_t PrefixStore::add(const std::string& key, int64_t value) {
  return store_->add(Key(key), value);
}
std::vector<uint8_t> PrefixStore::compare_set(const std::string& key,
                                              const std::vector<uint8_t>& expected,
                                              const std::vector<uint8_t>& desired) {
  return store_->compare_set(Key(key), expected, desired);
}
void PrefixStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  store_->wait(Keys(keys), timeout);
}
bool PrefixStore::check(const std::vector<std::string>& keys) { return store_->check(Keys(keys)); }
bool PrefixStore::delete_key(const std::string& key) { return store_->delete_key(Key(key)); }
int64_t PrefixStore::num_keys() { return store_->num_keys(); }
void PrefixStore::append(const std::string& key, const std::vector<uint8_t>& value) {
  store_->append(Key(key), value);
}
std::vector<std::vector<uint8_t>> PrefixStore::multi_get(const std::vector<std::string>& keys) {
  return store_->multi_get(Keys(keys));
}
void PrefixStore::multi_set(const std::vector<std::string>& keys,
                            const std::vector<std::vector<uint8_t>>& values) {
  store_->multi_set(Keys(keys), values);
}
void PrefixStore::set_timeout(std::chrono::milliseconds timeout) {
  Store::set_timeout(timeout);
  store_->set_timeout(timeout);
}

std::shared_ptr<Store> PrefixStore::Clone() {
  std::shared_ptr<Store> base = store_->Clone();
  return base ? std::make_shared<PrefixStore>(prefix_, std::move(base)) : nullptr;
}

}  // namespace distributed
}  // namespace phi
