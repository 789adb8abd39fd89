// FileStore: processes on one machine (or on a shared file system with working flock)
// rendezvous through one file.
//
// The file is an append-only log of records (set / delete), written under flock(LOCK_EX)
// with one append per record, and read under flock(LOCK_SH). Each process replays only the
// records it has not seen yet, so concurrent writers never lose an update and add() is
// atomic across processes. A record cut short by a writer that died mid-write is dropped by
// the next writer (it truncates the torn tail while holding the exclusive lock).
// get()/wait() re-read the log with a short backoff (1 ms growing to 50 ms): a file offers
// no server to park on. The file stays after the store is gone; remove it yourself.
#pragma once

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "phi/core/distributed/store/store.h"

namespace phi {
namespace distributed {

class FileStore : public Store {
 public:
  explicit FileStore(std::string path, std::chrono::milliseconds timeout = kDefaultTimeout);
  ~FileStore() override;

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

  const std::string& path() const { return path_; }

 private:
  enum RecordType : uint8_t { kSetRecord = 'S', kDeleteRecord = 'D' };
  class Lock;  // flock guard + this process's mutex

  // Reads records appended since the last call; `exclusive` allows truncating a torn tail.
  void Refresh(bool exclusive);
  void Append(RecordType type, const std::string& key, const std::vector<uint8_t>& value);
  std::vector<std::string> MissingLocked(const std::vector<std::string>& keys) const;
  // Polls until all keys exist; raises phi::TimeoutError naming the missing keys.
  void WaitFor(const std::vector<std::string>& keys, std::chrono::milliseconds timeout,
               const char* op);
  std::string Name() const { return "FileStore " + path_; }

  std::string path_;
  int fd_ = -1;
  std::mutex mu_;  // flock is per open file; threads of this process take turns here
  uint64_t offset_ = 0;
  std::unordered_map<std::string, std::vector<uint8_t>> cache_;
};

}  // namespace distributed
}  // namespace phi
