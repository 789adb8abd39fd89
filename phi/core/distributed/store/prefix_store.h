// PrefixStore: a view of another store in which every key is "<prefix>/<key>", so groups
// (and their engines' bootstrap data) sharing one store never read each other's entries.
// num_keys() counts the underlying store's keys, like c10d's PrefixStore.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "phi/core/distributed/store/store.h"

namespace phi {
namespace distributed {

class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> store);

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
  // Also sets the wrapped store's timeout, which is the one its get() honours.
  void set_timeout(std::chrono::milliseconds timeout) override;

  // The same prefix over a clone of the underlying store (nullptr when it has none).
  std::shared_ptr<Store> Clone() override;
  bool SetOnClose(const std::string& key, const std::vector<uint8_t>& value) override {
    return store_->SetOnClose(Key(key), value);
  }
  void CancelSetOnClose(const std::string& key) override {
    store_->CancelSetOnClose(Key(key));
  }

  const std::string& prefix() const { return prefix_; }
  const std::shared_ptr<Store>& underlying() const { return store_; }

 private:
  std::string Key(const std::string& key) const { return prefix_ + "/" + key; }
  std::vector<std::string> Keys(const std::vector<std::string>& keys) const;

  std::string prefix_;
  std::shared_ptr<Store> store_;
};

}  // namespace distributed
}  // namespace phi
