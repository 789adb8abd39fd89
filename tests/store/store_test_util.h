// What the store tests need around a store: a scratch file for FileStore, a free TCP port
// for a server started later, and a way for a rank that hosts a server to stay until the
// others are done with it.
#pragma once

#include <cstdint>
#include <string>

#include "tests/harness/multiprocess.h"

namespace paddle_like {
namespace testing {

// A file path unique to this process and `tag`, removed when made and when destroyed.
// Multi-process tests hand path() to their ranks: the ranks leave with _exit, so only the
// test's own process removes the file.
class ScopedTempFile {
 public:
  explicit ScopedTempFile(const std::string& tag);
  ~ScopedTempFile();
  ScopedTempFile(const ScopedTempFile&) = delete;
  ScopedTempFile& operator=(const ScopedTempFile&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A loopback port nobody listens on right now (bound, then released).
uint16_t FreePort();

// Every rank checks in under `key`; rank 0, which hosts the server the others use, returns
// only when all world_size ranks have, so it does not take the server away early.
void HostStaysUntilAllDone(const RankContext& ctx, const std::string& key);

}  // namespace testing
}  // namespace paddle_like
