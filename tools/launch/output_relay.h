// Relays one rank's stdout or stderr line by line, each line prefixed with "[rank R] ".
#pragma once

#include <string>

namespace paddle_like {
namespace launch {

class OutputRelay {
 public:
  // Reads from `in_fd` (non-blocking; owned, closed at EOF), writes prefixed lines to `out_fd`
  // and, unprefixed, to `log_fd` (-1: none). Neither out_fd nor log_fd is owned.
  OutputRelay(int in_fd, int out_fd, int log_fd, std::string prefix);
  ~OutputRelay();
  OutputRelay(const OutputRelay&) = delete;
  OutputRelay& operator=(const OutputRelay&) = delete;

  int fd() const { return in_fd_; }
  bool open() const { return in_fd_ >= 0; }
  // Reads what is available and writes every complete line. At EOF (or a read error) the
  // partial last line is written with a newline added and the pipe is closed.
  void OnReadable();
  // Writes the partial last line (if any) and closes the pipe.
  void Close();

  // A line longer than this is broken here so a rank printing without newlines cannot make
  // the launcher buffer without bound.
  static constexpr size_t kMaxLine = 64 * 1024;

 private:
  void EmitLines(bool flush_partial);

  int in_fd_;
  int out_fd_;
  int log_fd_;
  std::string prefix_;
  std::string pending_;  // bytes after the last newline
};

// write() all of it, retrying on EINTR; gives up quietly on other errors (a closed terminal
// must not stop the launcher from supervising its ranks).
void WriteAll(int fd, const char* data, size_t n);
void WriteAll(int fd, const std::string& s);

}  // namespace launch
}  // namespace paddle_like
