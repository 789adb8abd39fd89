#include "phi/core/distributed/peer_connection_internal.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <sstream>
#include <thread>

#include <glog/logging.h>

#include "phi/core/distributed/store/tcp_utils.h"
#include "phi/core/errors.h"

namespace phi {
namespace distributed {
namespace {
using Clock = std::chrono::steady_clock;

// Large enough that the exchange's messages never wait for an ACK the receiver delays (a
// ping-pong of messages that half-fill a small buffer hit the 40 ms delayed-ACK timer).
constexpr int kSocketBuffer = 1 << 20;
// How long one wait of Connect sleeps before it looks at Shutdown again.
constexpr int kConnectSliceMs = 50;

uint64_t RandomNonce() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ 0x9e3779b97f4a7c15ull;
}

void Tune(int fd) {
  tcputils::SetNoDelay(fd);
  int size = kSocketBuffer;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
}
}  // namespace

PeerConnection::PeerConnection(std::shared_ptr<Store> store, std::string key, int rank,
                               const std::string& host, std::string describe)
    : store_(std::move(store)),
      key_(std::move(key)),
      rank_(rank),
      peer_(1 - rank),
      describe_(std::move(describe)) {
  if (rank_ != 0) return;
  std::string error;
  listen_fd_ = tcputils::Listen(host, 0, &error);
  PADDLE_ENFORCE(listen_fd_ >= 0,
                 errors::Unavailable("%s: cannot listen on %s for the connection with rank 1: "
                                     "%s",
                                     describe_.c_str(), host.c_str(), error.c_str()));
  nonce_ = RandomNonce();
  std::ostringstream value;
  value << host << ' ' << tcputils::LocalPort(listen_fd_) << ' ' << nonce_;
  store_->set(key_, value.str());
}

PeerConnection::~PeerConnection() {
  if (fd_ >= 0) ::close(fd_);
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void PeerConnection::Shutdown() {
  std::lock_guard<std::mutex> lk(mu_);
  shut_.store(true);
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);  // wakes a blocked poll; the peer reads EOF
}

void PeerConnection::Adopt(int fd) {
  Tune(fd);
  std::lock_guard<std::mutex> lk(mu_);
  fd_ = fd;
  if (shut_.load()) ::shutdown(fd_, SHUT_RDWR);
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    listen_fd_ = -1;
  }
}

void PeerConnection::Connect(std::chrono::milliseconds timeout) {
  if (fd_ >= 0) return;
  PADDLE_ENFORCE(!shut_.load(), errors::Unavailable("%s: the connection with rank %d was shut "
                                                    "down (the communicator was aborted)",
                                                    describe_.c_str(), peer_));
  const auto deadline = Clock::now() + timeout;
  if (rank_ == 0) {
    Accept(deadline);
  } else {
    Dial(deadline);
  }
  VLOG(2) << describe_ << ": connected to rank " << peer_ << " ("
          << tcputils::Endpoint(fd_, false) << " -> " << tcputils::Endpoint(fd_, true) << ")";
}

void PeerConnection::Accept(Clock::time_point deadline) {
  for (;;) {
    PADDLE_ENFORCE(!shut_.load(), errors::Unavailable("%s: aborted while waiting for rank %d "
                                                      "to connect",
                                                      describe_.c_str(), peer_));
    PADDLE_ENFORCE(Clock::now() < deadline,
                   errors::Timeout("%s: rank %d did not connect within the group's timeout "
                                   "(it died, hangs, or never runs this op)",
                                   describe_.c_str(), peer_));
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, std::min(kConnectSliceMs, tcputils::MillisUntil(deadline))) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) continue;
    // The peer's first bytes are the nonce; anything else is not the peer.
    uint64_t got = 0;
    size_t have = 0;
    const auto hello_by = std::min(deadline, Clock::now() + std::chrono::seconds(5));
    std::string error;
    while (have < sizeof(got)) {
      const long n = tcputils::RecvSome(fd, reinterpret_cast<uint8_t*>(&got) + have,
                                        sizeof(got) - have, hello_by, &error);
      if (n <= 0) break;
      have += static_cast<size_t>(n);
    }
    if (have == sizeof(got) && got == nonce_) {
      Adopt(fd);
      return;
    }
    LOG(WARNING) << describe_ << ": closed a connection from " << tcputils::Endpoint(fd, true)
                 << " that did not identify as rank " << peer_ << " of this group";
    ::close(fd);
  }
}

int DialPublishedAddress(Store* store, const std::string& key, int peer,
                         std::chrono::steady_clock::time_point deadline,
                         const std::function<bool()>& aborted, const std::string& describe,
                         uint64_t* nonce, std::string* rest) {
  std::string value;
  for (;;) {  // in slices, so that an abort is seen
    PADDLE_ENFORCE(!aborted(), errors::Unavailable("%s: aborted while waiting for rank %d",
                                                   describe.c_str(), peer));
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                             Clock::now());
    PADDLE_ENFORCE(left.count() > 0,
                   errors::Timeout("%s: rank %d did not create this group within the group's "
                                   "timeout (it died, hangs, or never creates it)",
                                   describe.c_str(), peer));
    try {
      store->wait({key}, std::min(left, std::chrono::milliseconds(kConnectSliceMs)));
      const std::vector<uint8_t> bytes = store->get(key);
      value.assign(bytes.begin(), bytes.end());
      break;
    } catch (const TimeoutError&) {
    }
  }
  std::istringstream in(value);
  std::string host;
  unsigned port = 0;
  PADDLE_ENFORCE(static_cast<bool>(in >> host >> port >> *nonce) && port > 0 && port < 65536,
                 errors::External("%s: rank %d published a malformed address '%s'",
                                  describe.c_str(), peer, value.c_str()));
  if (rest != nullptr) {
    std::getline(in >> std::ws, *rest);
  }
  std::string error;
  for (;;) {
    const int fd = tcputils::ConnectOnce(host, static_cast<uint16_t>(port), deadline, &error);
    if (fd >= 0) return fd;
    PADDLE_ENFORCE(!aborted() && Clock::now() < deadline,
                   errors::Unavailable("%s: connecting to rank %d at %s failed: %s",
                                       describe.c_str(), peer,
                                       tcputils::HostPort(host, static_cast<uint16_t>(port))
                                           .c_str(),
                                       error.c_str()));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void PeerConnection::Dial(Clock::time_point deadline) {
  uint64_t nonce = 0;
  const int fd = DialPublishedAddress(store_.get(), key_, peer_, deadline,
                                      [this] { return shut_.load(); }, describe_, &nonce);
  std::string error;
  if (!tcputils::SendAll(fd, reinterpret_cast<const uint8_t*>(&nonce), sizeof(nonce), deadline,
                         &error)) {
    ::close(fd);
    PADDLE_THROW(errors::Unavailable("%s: greeting rank %d failed: %s", describe_.c_str(),
                                     peer_, error.c_str()));
  }
  Adopt(fd);
}

void PeerConnection::Fail(const std::string& what, int err) const {
  PADDLE_THROW(errors::Unavailable("%s: %s with rank %d failed: %s (the connection to rank %d "
                                   "ended)",
                                   describe_.c_str(), what.c_str(), peer_, std::strerror(err),
                                   peer_));
}

void PeerConnection::Duplex(const char* what, DuplexStreams* s,
                            std::chrono::milliseconds timeout, SpinPolicy* spin) {
  const int fd = fd_;
  size_t sent = 0, received = 0;
  const size_t send_total = s->SendTotal();
  // "sent S of T bytes, received R of T": where the streams stood, for the errors.
  auto where = [&] {
    return std::string(what) + ": sent " + std::to_string(sent) + " of " +
           std::to_string(send_total) + " bytes, received " + std::to_string(received) +
           " of " + std::to_string(s->RecvTotal());
  };
  if (shut_.load()) Fail(where(), ESHUTDOWN);

  // The spin rule (spin_policy.h) applied to a stream: spin for the peer's first bytes only
  // while armed; once its bytes flow the gaps are short and spinning pays, until a gap
  // outlasts the bound. The next wait is armed only if every gap of this call was shorter.
  const auto bound = SpinPolicy::Bound();
  const bool spin_for_arrival = spin->armed();
  bool arrival_late = false, stream_late = false;
  auto idle_since = Clock::now();
  auto heard = idle_since;  // when the peer's bytes last arrived
  bool idle = false;
  while (sent < send_total || received < s->RecvTotal()) {
    const bool awaiting_arrival = received == 0;
    bool progress = false;
    const char* from = nullptr;
    const size_t can_send = sent < send_total ? s->ReadyToSend(sent, &from) : 0;
    if (can_send > 0) {
      const ssize_t w = ::send(fd, from, can_send, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (w > 0) {
        sent += static_cast<size_t>(w);
        progress = true;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        Fail("the send of " + where(), errno);
      }
    }
    bool arrived = false;
    if (received < s->RecvTotal()) {
      char* to = nullptr;
      const size_t room = s->RoomToReceive(received, &to);
      const ssize_t r = ::recv(fd, to, room, MSG_DONTWAIT);
      if (r > 0) {
        const size_t before = received;
        received += static_cast<size_t>(r);
        progress = arrived = true;
        s->Received(before, received);
      } else if (r == 0) {
        PADDLE_THROW(errors::Unavailable("%s: rank %d closed the connection (%s)",
                                         describe_.c_str(), peer_, where().c_str()));
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        Fail("the receive of " + where(), errno);
      }
    }
    // The timeout counts from the last bytes the peer sent, not from this rank's own sends:
    // the kernel goes on taking a trickle of them for a stopped peer.
    const auto now = Clock::now();
    if (arrived) {
      heard = now;
    } else if (now - heard >= timeout) {
      PADDLE_THROW(errors::Timeout("%s: rank %d sent nothing for %lld ms (%s)",
                                   describe_.c_str(), peer_,
                                   static_cast<long long>(timeout.count()), where().c_str()));
    }
    if (progress) {
      if (idle && now - idle_since >= bound) (awaiting_arrival ? arrival_late : stream_late) = true;
      idle = false;
      continue;
    }
    // Nothing moved: spin (the peer is usually mid-write; a blocking wait costs a wake-up),
    // then wait in poll.
    if (!idle) {
      idle = true;
      idle_since = now;
    }
    const bool may_spin = awaiting_arrival ? spin_for_arrival : !stream_late;
    if (may_spin && now - idle_since < bound) continue;
    pollfd p{fd, 0, 0};
    if (received < s->RecvTotal()) p.events |= POLLIN;
    if (sent < send_total && s->ReadyToSend(sent, &from) > 0) p.events |= POLLOUT;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(timeout - (now - heard));
    if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(1, left.count()))) < 0 &&
        errno != EINTR) {
      Fail("the poll of " + where(), errno);
    }
    if (shut_.load()) Fail(where(), ESHUTDOWN);
  }
  spin->Set(!arrival_late && !stream_late);
}

}  // namespace distributed
}  // namespace phi
