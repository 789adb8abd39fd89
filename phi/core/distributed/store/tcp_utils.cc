#include "phi/core/distributed/store/tcp_utils.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace phi {
namespace distributed {
namespace tcputils {
namespace {

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

struct AddrInfo {
  addrinfo* head = nullptr;
  ~AddrInfo() {
    if (head) freeaddrinfo(head);
  }
};

int Resolve(const std::string& host, uint16_t port, bool passive, AddrInfo* out,
            std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  std::string service = std::to_string(port);
  // An empty host means the wildcard only when the caller asks for it explicitly.
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints,
                       &out->head);
  if (rc != 0) {
    *error = "cannot resolve '" + host + "': " + gai_strerror(rc);
    return -1;
  }
  return 0;
}

}  // namespace

std::string HostPort(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

bool SplitHostPort(const std::string& s, std::string* host, std::string* port) {
  if (!s.empty() && s[0] == '[') {
    auto close = s.find(']');
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':') return false;
    *host = s.substr(1, close - 1);
    *port = s.substr(close + 2);
  } else {
    auto colon = s.rfind(':');
    if (colon == std::string::npos) return false;
    *host = s.substr(0, colon);
    *port = s.substr(colon + 1);
  }
  return !host->empty() && !port->empty();
}

int MillisUntil(Clock::time_point deadline) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (ms < 0) return 0;
  if (ms > INT_MAX) return INT_MAX;
  return static_cast<int>(ms);
}

bool SetNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int Listen(const std::string& host, uint16_t port, std::string* error) {
  AddrInfo ai;
  if (Resolve(host, port, /*passive=*/true, &ai, error) != 0) return -1;
  std::string last = "no usable address";
  for (addrinfo* a = ai.head; a; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last = Errno("socket");
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0) {
      last = Errno("bind");
      close(fd);
      continue;
    }
    if (listen(fd, 1024) != 0) {
      last = Errno("listen");
      close(fd);
      continue;
    }
    return fd;
  }
  *error = last;
  return -1;
}

uint16_t LocalPort(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

std::string Endpoint(int fd, bool peer) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  auto* sa = reinterpret_cast<sockaddr*>(&ss);
  if ((peer ? getpeername(fd, sa, &len) : getsockname(fd, sa, &len)) != 0) return "";
  char host[NI_MAXHOST] = {0};
  char serv[NI_MAXSERV] = {0};
  if (getnameinfo(sa, len, host, sizeof(host), serv, sizeof(serv),
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "";
  }
  std::string h = host;
  if (h.rfind("::ffff:", 0) == 0 && h.find('.') != std::string::npos) h = h.substr(7);
  return HostPort(h, static_cast<uint16_t>(std::atoi(serv)));
}

int ConnectOnce(const std::string& host, uint16_t port, Clock::time_point deadline,
                std::string* error) {
  AddrInfo ai;
  if (Resolve(host, port, /*passive=*/false, &ai, error) != 0) return -1;
  for (addrinfo* a = ai.head; a; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      *error = Errno("socket");
      continue;
    }
    int rc = connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int pr;
      do {
        pr = poll(&p, 1, MillisUntil(deadline));
      } while (pr < 0 && errno == EINTR);
      if (pr == 0) {
        *error = "connect timed out";
        close(fd);
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc != 0) {
      *error = Errno("connect");
      close(fd);
      continue;
    }
    SetNoDelay(fd);
    return fd;
  }
  return -1;
}

bool SendAll(int fd, const uint8_t* data, size_t size, Clock::time_point deadline,
             std::string* error) {
  size_t sent = 0;
  while (sent < size) {
    ssize_t n = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      int pr = poll(&p, 1, MillisUntil(deadline));
      if (pr == 0) {
        *error = "send timed out";
        return false;
      }
      continue;
    }
    *error = Errno("send");
    return false;
  }
  return true;
}

long RecvSome(int fd, uint8_t* buf, size_t cap, Clock::time_point deadline, std::string* error) {
  for (;;) {
    ssize_t n = recv(fd, buf, cap, 0);
    if (n >= 0) return static_cast<long>(n);
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      *error = Errno("recv");
      return -1;
    }
    pollfd p{fd, POLLIN, 0};
    int pr = poll(&p, 1, MillisUntil(deadline));
    if (pr == 0) {
      *error = "receive timed out";
      return -2;
    }
  }
}

}  // namespace tcputils
}  // namespace distributed
}  // namespace phi
