#include "tests/store/store_test_util.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

namespace paddle_like {
namespace testing {

ScopedTempFile::ScopedTempFile(const std::string& tag)
    : path_("/tmp/paddle_like_filestore_" + tag + "_" + std::to_string(getpid())) {
  std::remove(path_.c_str());  // a leftover of an earlier run with the same pid
}

ScopedTempFile::~ScopedTempFile() { std::remove(path_.c_str()); }

uint16_t FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

void HostStaysUntilAllDone(const RankContext& ctx, const std::string& key) {
  ctx.store->add(key, 1);
  if (ctx.rank != 0) return;
  while (ctx.store->add(key, 0) < ctx.world_size) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace testing
}  // namespace paddle_like
