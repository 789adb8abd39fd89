#include "phi/core/distributed/shm_segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>

#include <glog/logging.h>

namespace phi {
namespace distributed {
namespace {
constexpr const char* kNamePrefix = "paddle_like_shm_";
// How old a segment of a creator that is gone must be to count as stale: until then the
// process it was meant for may still open it (a point-to-point channel's dialer that sent its
// bytes and exited, as a socket's writer may, before the listener read the hello). Such a
// listener, alive, opens it within milliseconds.
constexpr time_t kStaleAfterSeconds = 60;
}  // namespace

std::string NewShmSegmentName() {
  std::random_device rd;
  uint64_t r = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  char buf[96];
  std::snprintf(buf, sizeof(buf), "/%s%d_%016llx", kNamePrefix, static_cast<int>(getpid()),
                static_cast<unsigned long long>(r));
  return buf;
}

bool IsShmSegmentName(const std::string& name) {
  const std::string prefix = std::string("/") + kNamePrefix;
  return name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
         name.find('/', 1) == std::string::npos;
}

void RemoveStaleShmSegments() {
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return;
  const size_t prefix = std::strlen(kNamePrefix);
  while (dirent* e = readdir(dir)) {
    if (std::strncmp(e->d_name, kNamePrefix, prefix) != 0) continue;
    const long pid = std::strtol(e->d_name + prefix, nullptr, 10);
    struct stat st {};
    if (fstatat(dirfd(dir), e->d_name, &st, 0) != 0 ||
        time(nullptr) - st.st_mtime < kStaleAfterSeconds) {
      continue;
    }
    if (pid <= 0 || (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)) {
      if (shm_unlink((std::string("/") + e->d_name).c_str()) == 0) {
        VLOG(1) << "removed the stale shared-memory segment " << e->d_name;
      }
    }
  }
  closedir(dir);
}

int CreateShmSegment(const std::string& name, size_t bytes, std::string* error) {
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    *error = "creating " + name + ": " + std::strerror(errno);
    return -1;
  }
  const int err = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (err != 0) {
    *error = "allocating " + std::to_string(bytes) + " bytes for " + name + ": " +
             std::strerror(err);
    close(fd);
    shm_unlink(name.c_str());
    return -1;
  }
  return fd;
}

void* MapShmSegment(int fd, size_t bytes, std::string* error) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    *error = std::string("mmap: ") + std::strerror(errno);
    return nullptr;
  }
  return p;
}

}  // namespace distributed
}  // namespace phi
