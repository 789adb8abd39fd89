#include "phi/core/distributed/store/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "phi/core/distributed/store/store_utils.h"
#include "phi/core/errors.h"

namespace phi {
namespace distributed {

namespace {
void PutU32(std::vector<uint8_t>* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<uint8_t>(v >> (8 * i)));
}
uint32_t GetU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}
}  // namespace

class FileStore::Lock {
 public:
  Lock(FileStore* s, bool exclusive) : s_(s), guard_(s->mu_) {
    int rc;
    do {
      rc = flock(s_->fd_, exclusive ? LOCK_EX : LOCK_SH);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      PADDLE_THROW(errors::External("%s: flock failed: %s", s_->Name().c_str(),
                                    std::strerror(errno)));
    }
    try {
      s_->Refresh(exclusive);
    } catch (...) {
      flock(s_->fd_, LOCK_UN);
      throw;
    }
  }
  ~Lock() { flock(s_->fd_, LOCK_UN); }

 private:
  FileStore* s_;
  std::lock_guard<std::mutex> guard_;
};

FileStore::FileStore(std::string path, std::chrono::milliseconds timeout)
    : Store(timeout), path_(std::move(path)) {
  fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd_ < 0) {
    PADDLE_THROW(errors::Unavailable("FileStore cannot open '%s': %s", path_.c_str(),
                                     std::strerror(errno)));
  }
}

FileStore::~FileStore() {
  if (fd_ >= 0) close(fd_);
}

void FileStore::Refresh(bool exclusive) {
  struct stat st {};
  if (fstat(fd_, &st) != 0) {
    PADDLE_THROW(errors::External("%s: fstat failed: %s", Name().c_str(), std::strerror(errno)));
  }
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < offset_) {  // someone truncated the file: start over
    cache_.clear();
    offset_ = 0;
  }
  if (size == offset_) return;
  std::vector<uint8_t> buf(size - offset_);
  size_t got = 0;
  while (got < buf.size()) {
    ssize_t n = pread(fd_, buf.data() + got, buf.size() - got, static_cast<off_t>(offset_ + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      PADDLE_THROW(errors::External("%s: read failed: %s", Name().c_str(),
                                    n < 0 ? std::strerror(errno) : "unexpected end of file"));
    }
    got += static_cast<size_t>(n);
  }
  size_t pos = 0;
  for (;;) {
    // type, key length, key, value length, value; anything shorter is a torn tail.
    if (buf.size() - pos < 5) break;
    uint8_t type = buf[pos];
    uint32_t klen = GetU32(&buf[pos + 1]);
    if (buf.size() - pos - 5 < klen + 4ull) break;
    uint32_t vlen = GetU32(&buf[pos + 5 + klen]);
    if (buf.size() - pos - 9 - klen < vlen) break;
    std::string key(reinterpret_cast<const char*>(&buf[pos + 5]), klen);
    const uint8_t* v = &buf[pos + 9 + klen];
    if (type == kSetRecord) {
      cache_[key].assign(v, v + vlen);
    } else if (type == kDeleteRecord) {
      cache_.erase(key);
    } else {
      PADDLE_THROW(errors::External("%s: corrupt record at offset %llu (type %d); is this "
                                    "file a FileStore?",
                                    Name().c_str(), static_cast<unsigned long long>(offset_ + pos),
                                    type));
    }
    pos += 9 + klen + vlen;
  }
  offset_ += pos;
  if (pos < buf.size() && exclusive) {
    // Only a writer that died mid-append leaves this; with the exclusive lock held no one
    // else is writing, so drop it before appending after it.
    if (ftruncate(fd_, static_cast<off_t>(offset_)) != 0) {
      PADDLE_THROW(errors::External("%s: ftruncate failed: %s", Name().c_str(),
                                    std::strerror(errno)));
    }
  }
}

void FileStore::Append(RecordType type, const std::string& key,
                       const std::vector<uint8_t>& value) {
  std::vector<uint8_t> rec;
  rec.reserve(9 + key.size() + value.size());
  rec.push_back(type);
  PutU32(&rec, static_cast<uint32_t>(key.size()));
  rec.insert(rec.end(), key.begin(), key.end());
  PutU32(&rec, static_cast<uint32_t>(value.size()));
  rec.insert(rec.end(), value.begin(), value.end());
  size_t done = 0;
  while (done < rec.size()) {
    ssize_t n = write(fd_, rec.data() + done, rec.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      PADDLE_THROW(errors::External("%s: write of key '%s' failed: %s", Name().c_str(),
                                    key.c_str(), std::strerror(errno)));
    }
    done += static_cast<size_t>(n);
  }
  // Our own record is now in the file; replay it like everyone else's.
  Refresh(true);
}

std::vector<std::string> FileStore::MissingLocked(const std::vector<std::string>& keys) const {
  std::vector<std::string> missing;
  for (const auto& k : keys) {
    if (!cache_.count(k)) missing.push_back(k);
  }
  return missing;
}

void FileStore::WaitFor(const std::vector<std::string>& keys, std::chrono::milliseconds timeout,
                        const char* op) {
  const auto started = std::chrono::steady_clock::now();
  auto backoff = std::chrono::milliseconds(1);
  for (;;) {
    std::vector<std::string> missing;
    {
      Lock lock(this, false);
      missing = MissingLocked(keys);
    }
    if (missing.empty()) return;
    auto now = std::chrono::steady_clock::now();
    if (now >= started + timeout) {
      store_utils::ThrowTimeout(Name(), op, missing, timeout, started);
    }
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        backoff, started + timeout - now));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(50));
  }
}

void FileStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  Lock lock(this, true);
  Append(kSetRecord, key, value);
}

std::vector<uint8_t> FileStore::get(const std::string& key) {
  WaitFor({key}, timeout_, "get");
  Lock lock(this, false);
  auto it = cache_.find(key);
  if (it == cache_.end()) {  // deleted between the wait and now
    store_utils::ThrowTimeout(Name(), "get", {key}, timeout_, std::chrono::steady_clock::now());
  }
  return it->second;
}

int64_t FileStore::add(const std::string& key, int64_t value) {
  Lock lock(this, true);
  auto it = cache_.find(key);
  int64_t cur = it == cache_.end() ? 0 : store_utils::ParseCounter(Name(), key, it->second);
  int64_t sum = store_utils::CheckedAdd(Name(), key, cur, value);
  Append(kSetRecord, key, store_utils::EncodeCounter(sum));
  return sum;
}

std::vector<uint8_t> FileStore::compare_set(const std::string& key,
                                            const std::vector<uint8_t>& expected,
                                            const std::vector<uint8_t>& desired) {
  Lock lock(this, true);
  auto it = cache_.find(key);
  bool match = it == cache_.end() ? expected.empty() : it->second == expected;
  if (!match) return it == cache_.end() ? std::vector<uint8_t>() : it->second;
  Append(kSetRecord, key, desired);
  return desired;
}

void FileStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  WaitFor(keys, timeout, "wait");
}

bool FileStore::check(const std::vector<std::string>& keys) {
  Lock lock(this, false);
  return MissingLocked(keys).empty();
}

bool FileStore::delete_key(const std::string& key) {
  Lock lock(this, true);
  if (!cache_.count(key)) return false;
  Append(kDeleteRecord, key, {});
  return true;
}

int64_t FileStore::num_keys() {
  Lock lock(this, false);
  return static_cast<int64_t>(cache_.size());
}

void FileStore::append(const std::string& key, const std::vector<uint8_t>& value) {
  Lock lock(this, true);
  std::vector<uint8_t> v;
  auto it = cache_.find(key);
  if (it != cache_.end()) v = it->second;
  v.insert(v.end(), value.begin(), value.end());
  Append(kSetRecord, key, v);
}

std::vector<std::vector<uint8_t>> FileStore::multi_get(const std::vector<std::string>& keys) {
  WaitFor(keys, timeout_, "multi_get");
  Lock lock(this, false);
  std::vector<std::string> missing = MissingLocked(keys);
  if (!missing.empty()) {
    store_utils::ThrowTimeout(Name(), "multi_get", missing, timeout_,
                              std::chrono::steady_clock::now());
  }
  std::vector<std::vector<uint8_t>> out;
  for (const auto& k : keys) out.push_back(cache_.at(k));
  return out;
}

void FileStore::multi_set(const std::vector<std::string>& keys,
                          const std::vector<std::vector<uint8_t>>& values) {
  PADDLE_ENFORCE_EQ(keys.size(), values.size(),
                    errors::InvalidArgument("%s: multi_set needs one value per key",
                                            Name().c_str()));
  Lock lock(this, true);
  for (size_t i = 0; i < keys.size(); ++i) Append(kSetRecord, keys[i], values[i]);
}

}  // namespace distributed
}  // namespace phi
