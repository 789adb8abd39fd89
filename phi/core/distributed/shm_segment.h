// Naming and sweeping the runtime's shared-memory segments (internal to the CPU engine: the
// shared-memory group, shm_group.h, and the point-to-point channels, p2p_shm_channel.h).
//
// A segment is created under a name that carries its creator's pid and unlinked once every
// process that needs it has mapped it. A crash inside that window leaves the name behind;
// a creation on the host removes every such name whose creator is gone, once it is a minute
// old (until then the process it was meant for may still open it).
#pragma once

#include <cstddef>
#include <string>

namespace phi {
namespace distributed {

// "/paddle_like_shm_<pid>_<random>": a fresh name for a segment this process creates.
std::string NewShmSegmentName();
// Whether `name` has the form NewShmSegmentName gives (a name read from the wire is checked).
bool IsShmSegmentName(const std::string& name);
// Unlinks the segments left by creators that have exited, once they are a minute old.
void RemoveStaleShmSegments();
// Creates (O_EXCL) and sizes a segment, allocating its pages now: a full /dev/shm fails
// here instead of with SIGBUS when a page is first touched. The descriptor, or -1 with
// `*error` set.
int CreateShmSegment(const std::string& name, size_t bytes, std::string* error);
// Maps `bytes` of `fd` shared, read and write; nullptr with `*error` set.
void* MapShmSegment(int fd, size_t bytes, std::string* error);

}  // namespace distributed
}  // namespace phi
