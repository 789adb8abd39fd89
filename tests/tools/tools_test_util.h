// Helpers for the tools tests: run the built binaries as real processes, look at pids, and
// parse comm_bench's JSON.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace paddle_like {
namespace testing {

struct ProcResult {
  int status = -1;          // waitpid status
  bool timed_out = false;   // killed by the helper
  std::string output;       // stdout and stderr, interleaved
  double seconds = 0;       // wall time from start to exit

  int exit_code() const;    // -1 when killed by a signal
};

// A child process whose stdout and stderr go to one pipe.
class Proc {
 public:
  Proc(const std::vector<std::string>& argv,
       const std::map<std::string, std::string>& env = {});
  ~Proc();  // kills it (SIGKILL) if still running
  pid_t pid() const { return pid_; }
  // Reads its output until it exits (or `timeout`, then SIGKILL) and reaps it.
  ProcResult Finish(std::chrono::milliseconds timeout);
  // Output read so far (non-blocking read of what is there now).
  const std::string& Poll();

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string out_;
  std::chrono::steady_clock::time_point start_;
};

ProcResult RunProc(const std::vector<std::string>& argv,
                   std::chrono::milliseconds timeout = std::chrono::seconds(60),
                   const std::map<std::string, std::string>& env = {});

// True while `pid` exists and is not a zombie.
bool PidAlive(pid_t pid);

// A fresh temporary directory (removed by the destructor).
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string ReadFile(const std::string& path);

// A minimal JSON value and parser (objects, arrays, strings, numbers, true/false/null).
struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<Json> arr;
  std::map<std::string, Json> obj;
  const Json& operator[](const std::string& key) const;
  bool has(const std::string& key) const { return obj.count(key) != 0; }
};
// Throws std::runtime_error naming the offset when `text` is not valid JSON.
Json ParseJson(const std::string& text);

}  // namespace testing
}  // namespace paddle_like
