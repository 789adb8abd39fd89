// A deliberately dumb TCP client for robustness tests: sends arbitrary bytes to a store
// server and reads whatever comes back, without any of TCPStore's protocol handling.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "phi/core/distributed/store/tcp_store_protocol.h"

namespace paddle_like {
namespace testing {

class RawClient {
 public:
  RawClient(const std::string& host, int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, host.c_str(), &a.sin_addr);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~RawClient() {
    if (fd_ >= 0) close(fd_);
  }
  bool connected() const { return fd_ >= 0; }

  bool Send(const std::vector<uint8_t>& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  void ShutdownWrite() { shutdown(fd_, SHUT_WR); }

  // Reads one frame (the hello, say); false on EOF, garbage or timeout.
  bool ReadFrame(phi::distributed::tcpstore::Frame* f, int timeout_ms = 5000) {
    for (;;) {
      size_t used = 0;
      std::string err;
      auto st = phi::distributed::tcpstore::ParseFrame(buf_.data(), buf_.size(), f, &used, &err);
      if (st == phi::distributed::tcpstore::ParseStatus::kOk) {
        buf_.erase(buf_.begin(), buf_.begin() + static_cast<long>(used));
        return true;
      }
      if (st == phi::distributed::tcpstore::ParseStatus::kMalformed) return false;
      if (ReadSome(timeout_ms) <= 0) return false;
    }
  }

  // Reads until the server closes the connection. Returns false when it did not close
  // within timeout_ms (the server kept a connection open it should have dropped).
  bool ReadUntilEof(int timeout_ms = 5000) {
    for (;;) {
      long n = ReadSome(timeout_ms);
      if (n == 0) return true;
      if (n < 0) return n == -1;  // -1: reset (closed too), -2: timeout
    }
  }
  // Bytes received and not yet parsed as frames.
  const std::vector<uint8_t>& pending() const { return buf_; }

 private:
  // >0 bytes, 0 EOF, -1 error/reset, -2 timeout.
  long ReadSome(int timeout_ms) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) return -2;
    uint8_t tmp[65536];
    ssize_t n = recv(fd_, tmp, sizeof(tmp), 0);
    if (n > 0) buf_.insert(buf_.end(), tmp, tmp + n);
    return n < 0 ? -1 : static_cast<long>(n);
  }

  int fd_ = -1;
  std::vector<uint8_t> buf_;
};

inline std::vector<uint8_t> EncodeRequest(phi::distributed::tcpstore::Command cmd,
                                          std::vector<std::string> keys,
                                          std::vector<std::vector<uint8_t>> values,
                                          int64_t integer = 0) {
  phi::distributed::tcpstore::Frame f;
  f.type = static_cast<uint8_t>(cmd);
  f.keys = std::move(keys);
  f.values = std::move(values);
  f.integer = integer;
  std::vector<uint8_t> out;
  std::string err;
  phi::distributed::tcpstore::EncodeFrame(f, &out, &err);
  return out;
}

}  // namespace testing
}  // namespace paddle_like
