#include "tools/launch/output_relay.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace paddle_like {
namespace launch {

void WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {  // a non-blocking terminal or pipe
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, 100);
        continue;
      }
      return;
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
}

void WriteAll(int fd, const std::string& s) { WriteAll(fd, s.data(), s.size()); }

OutputRelay::OutputRelay(int in_fd, int out_fd, int log_fd, std::string prefix)
    : in_fd_(in_fd), out_fd_(out_fd), log_fd_(log_fd), prefix_(std::move(prefix)) {}

OutputRelay::~OutputRelay() { Close(); }

void OutputRelay::OnReadable() {
  char buf[65536];
  for (;;) {
    ssize_t r = ::read(in_fd_, buf, sizeof(buf));
    if (r > 0) {
      pending_.append(buf, static_cast<size_t>(r));
      EmitLines(false);
      if (static_cast<size_t>(r) < sizeof(buf)) return;  // drained for now
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    Close();  // EOF or an error
    return;
  }
}

void OutputRelay::Close() {
  if (in_fd_ < 0) return;
  EmitLines(true);
  ::close(in_fd_);
  in_fd_ = -1;
}

void OutputRelay::EmitLines(bool flush_partial) {
  // Every complete line goes out in one write per batch, so lines of different ranks never
  // mix within a line.
  std::string out, log;
  size_t start = 0;
  for (;;) {
    size_t nl = pending_.find('\n', start);
    size_t end;
    if (nl != std::string::npos) {
      end = nl + 1;
    } else if (pending_.size() - start >= kMaxLine) {
      end = start + kMaxLine;
    } else {
      break;
    }
    out += prefix_;
    out.append(pending_, start, end - start);
    if (log_fd_ >= 0) log.append(pending_, start, end - start);
    if (out.back() != '\n') {
      out += '\n';
      if (log_fd_ >= 0) log += '\n';
    }
    start = end;
  }
  if (flush_partial && start < pending_.size()) {
    out += prefix_;
    out.append(pending_, start, std::string::npos);
    out += '\n';
    if (log_fd_ >= 0) {
      log.append(pending_, start, std::string::npos);
      log += '\n';
    }
    start = pending_.size();
  }
  pending_.erase(0, start);
  if (!out.empty()) WriteAll(out_fd_, out);
  if (!log.empty()) WriteAll(log_fd_, log);
}

}  // namespace launch
}  // namespace paddle_like
