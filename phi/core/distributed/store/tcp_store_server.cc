#include "phi/core/distributed/store/tcp_store_server.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "phi/core/distributed/store/store_auth.h"
#include "phi/core/distributed/store/tcp_store_protocol.h"
#include "phi/core/distributed/store/tcp_utils.h"
#include "phi/core/errors.h"

namespace phi {
namespace distributed {

using tcpstore::Command;
using tcpstore::Frame;
using tcpstore::Status;
using Clock = std::chrono::steady_clock;

namespace {
// Past this many connections the listener is not polled: new clients wait in the backlog
// instead of exhausting the server's file descriptors.
constexpr size_t kMaxConnections = 8192;
// Input buffered beyond one maximal frame means the peer pipelines while it waits; stop
// reading it until it drains (back-pressure instead of unbounded memory).
constexpr size_t kMaxBufferedInput = tcpstore::kHeaderBytes + tcpstore::kMaxPayloadBytes;
// Longest honoured wait; larger client timeouts are clamped so deadlines never overflow.
constexpr int64_t kMaxWaitMs = 30LL * 24 * 3600 * 1000;

bool ParseInt64(const std::vector<uint8_t>& v, int64_t* out) {
  if (v.empty() || v.size() > 20) return false;
  std::string s(v.begin(), v.end());
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end != s.c_str() + s.size()) return false;
  *out = x;
  return true;
}
}  // namespace

// The poll loop and the key-value state. Only the server thread touches anything here
// except the atomics and the wake pipe.
class TCPStoreServerLoop {
 public:
  TCPStoreServerLoop(int listen_fd, std::string token)
      : listen_fd_(listen_fd), token_(std::move(token)) {
    if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
      close(listen_fd_);
      PADDLE_THROW(errors::External("TCPStoreServer: pipe2 failed: %s", std::strerror(errno)));
    }
  }
  ~TCPStoreServerLoop() {
    for (auto& kv : conns_) close(kv.second.fd);
    close(listen_fd_);
    close(wake_[0]);
    close(wake_[1]);
  }

  void RequestStop() {
    stop_.store(true);
    char c = 1;
    ssize_t ignored = write(wake_[1], &c, 1);
    (void)ignored;
  }

  void Run();

  std::atomic<size_t> num_connections{0};
  std::atomic<size_t> num_rejected{0};

  std::vector<TCPStoreServer::Client> Clients() const {
    std::lock_guard<std::mutex> lock(clients_mu_);
    std::vector<TCPStoreServer::Client> out;
    const auto now = Clock::now();
    for (const auto& kv : clients_) {
      TCPStoreServer::Client c;
      c.endpoint = kv.second.endpoint;
      c.waiting = kv.second.waiting;
      c.idle = std::chrono::duration_cast<std::chrono::milliseconds>(now - kv.second.last_active);
      out.push_back(std::move(c));
    }
    return out;
  }

 private:
  struct Pending {
    Frame request;
    Clock::time_point deadline;
  };
  struct Connection {
    uint64_t id = 0;
    int fd = -1;
    std::vector<uint8_t> in;
    std::vector<uint8_t> out;
    size_t out_off = 0;
    bool authed = false;
    std::vector<uint8_t> nonce;
    bool close_after_flush = false;
    bool dead = false;
    bool has_pending = false;
    Pending pending;
    std::map<std::string, std::vector<uint8_t>> on_close;  // set when the connection ends
  };

  void Accept();
  // Closes and forgets the dead connections, setting their on-close keys; true when any
  // key was set.
  bool ReapDead();
  void ReadFrom(Connection& c);
  void ProcessInput(Connection& c);
  void Handle(Connection& c, Frame&& f);
  void HandleBlocking(Connection& c, Frame&& f);
  void Reply(Connection& c, Frame&& f);
  void ReplyError(Connection& c, const std::string& msg, bool close_after);
  void Flush(Connection& c);
  void Put(const std::string& key, std::vector<uint8_t> value);
  void Notify(const std::string& key);
  std::vector<std::string> Missing(const std::vector<std::string>& keys) const;
  void CompletePending(Connection& c);
  void Unregister(Connection& c);
  void ExpireDeadlines();
  void DrainRunnable();
  int PollTimeoutMs() const;

  int listen_fd_;
  int wake_[2] = {-1, -1};
  std::string token_;
  std::atomic<bool> stop_{false};
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, Connection> conns_;
  std::unordered_map<std::string, std::vector<uint8_t>> data_;
  // key -> connections whose parked request waits for it.
  std::unordered_map<std::string, std::unordered_set<uint64_t>> waiters_;
  std::vector<uint64_t> runnable_;
  // What other threads may know of each connection (Clients()).
  struct ClientState {
    std::string endpoint;
    Clock::time_point last_active;
    bool waiting = false;
  };
  void NoteActivity(const Connection& c) {
    std::lock_guard<std::mutex> lock(clients_mu_);
    ClientState& st = clients_[c.id];
    st.last_active = Clock::now();
    st.waiting = c.has_pending;
  }
  mutable std::mutex clients_mu_;
  std::unordered_map<uint64_t, ClientState> clients_;
};

void TCPStoreServerLoop::Run() {
  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;
  while (!stop_.load()) {
    fds.clear();
    ids.clear();
    fds.push_back({wake_[0], POLLIN, 0});
    bool listening = conns_.size() < kMaxConnections;
    if (listening) fds.push_back({listen_fd_, POLLIN, 0});
    for (auto& kv : conns_) {
      Connection& c = kv.second;
      short ev = 0;
      if (c.in.size() < kMaxBufferedInput && !c.close_after_flush) ev |= POLLIN;
      if (c.out_off < c.out.size()) ev |= POLLOUT;
      fds.push_back({c.fd, ev, 0});
      ids.push_back(c.id);
    }
    int rc = poll(fds.data(), fds.size(), PollTimeoutMs());
    if (rc < 0 && errno != EINTR) {
      LOG(ERROR) << "TCPStoreServer: poll failed: " << std::strerror(errno);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (fds[0].revents & POLLIN) {
      char buf[64];
      while (read(wake_[0], buf, sizeof(buf)) > 0) {
      }
    }
    if (stop_.load()) break;
    size_t first_conn = listening ? 2 : 1;
    if (listening && (fds[1].revents & POLLIN)) Accept();
    for (size_t i = first_conn; i < fds.size(); ++i) {
      auto it = conns_.find(ids[i - first_conn]);
      if (it == conns_.end() || it->second.dead) continue;
      Connection& c = it->second;
      short re = fds[i].revents;
      if (re & (POLLERR | POLLNVAL)) {
        c.dead = true;
        continue;
      }
      if (re & (POLLIN | POLLHUP)) ReadFrom(c);
      if (!c.dead && (re & POLLOUT)) Flush(c);
    }
    ExpireDeadlines();
    DrainRunnable();
    // A closed connection's on-close keys may wake waiters: serve them before polling again.
    while (ReapDead()) DrainRunnable();
  }
}

bool TCPStoreServerLoop::ReapDead() {
  bool set_any = false;
  for (auto it = conns_.begin(); it != conns_.end();) {
    if (!it->second.dead) {
      ++it;
      continue;
    }
    for (auto& [key, value] : it->second.on_close) Put(key, std::move(value));
    set_any |= !it->second.on_close.empty();
    Unregister(it->second);
    close(it->second.fd);
    VLOG(3) << "TCPStoreServer: closed connection " << it->first;
    {
      std::lock_guard<std::mutex> lock(clients_mu_);
      clients_.erase(it->first);
    }
    it = conns_.erase(it);
    num_connections.fetch_sub(1);
  }
  return set_any;
}

int TCPStoreServerLoop::PollTimeoutMs() const {
  bool any = false;
  Clock::time_point next;
  for (const auto& kv : conns_) {
    if (!kv.second.has_pending) continue;
    if (!any || kv.second.pending.deadline < next) next = kv.second.pending.deadline;
    any = true;
  }
  if (!any) return -1;
  // Round up so a wake-up never comes a millisecond early and spins.
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(next - Clock::now()).count();
  if (us <= 0) return 0;
  return static_cast<int>(std::min<int64_t>((us + 999) / 1000, 1 << 30));
}

void TCPStoreServerLoop::Accept() {
  for (;;) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        LOG(WARNING) << "TCPStoreServer: accept failed: " << std::strerror(errno);
      }
      return;
    }
    tcputils::SetNoDelay(fd);
    uint64_t id = next_id_++;
    Connection& c = conns_[id];
    c.id = id;
    c.fd = fd;
    num_connections.fetch_add(1);
    {
      std::lock_guard<std::mutex> lock(clients_mu_);
      clients_[id] = ClientState{tcputils::Endpoint(fd, /*peer=*/true), Clock::now(), false};
    }
    Frame hello;
    hello.type = static_cast<uint8_t>(Status::kHello);
    hello.keys.push_back(tcpstore::kProtocolName);
    if (!token_.empty()) {
      hello.integer = 1;
      try {
        c.nonce = RandomBytes(tcpstore::kNonceBytes);
      } catch (const std::exception& e) {
        LOG(ERROR) << "TCPStoreServer: " << e.what();
        c.dead = true;
        return;
      }
      hello.values.push_back(c.nonce);
    } else {
      c.authed = true;
    }
    VLOG(3) << "TCPStoreServer: accepted connection " << id;
    Reply(c, std::move(hello));
    if (conns_.size() >= kMaxConnections) return;
  }
}

void TCPStoreServerLoop::ReadFrom(Connection& c) {
  uint8_t buf[64 * 1024];
  // Bounded per wake-up so one chatty client cannot starve the others.
  for (int rounds = 0; rounds < 64 && c.in.size() < kMaxBufferedInput; ++rounds) {
    ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
    if (n > 0) {
      if (rounds == 0) NoteActivity(c);
      c.in.insert(c.in.end(), buf, buf + n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    // EOF or a reset: a half-received frame, a parked request, everything of this
    // connection is dropped; nothing else is affected.
    c.dead = true;
    return;
  }
  ProcessInput(c);
}

void TCPStoreServerLoop::ProcessInput(Connection& c) {
  size_t off = 0;
  while (!c.dead && !c.has_pending && !c.close_after_flush) {
    Frame f;
    size_t used = 0;
    std::string err;
    auto st = tcpstore::ParseFrame(c.in.data() + off, c.in.size() - off, &f, &used, &err);
    if (st == tcpstore::ParseStatus::kIncomplete) break;
    if (st == tcpstore::ParseStatus::kMalformed || !tcpstore::ValidateRequest(f, &err)) {
      num_rejected.fetch_add(1);
      VLOG(1) << "TCPStoreServer: closing connection " << c.id << ", bad request: " << err;
      ReplyError(c, "malformed request: " + err, /*close_after=*/true);
      break;
    }
    off += used;
    try {
      Handle(c, std::move(f));
    } catch (const std::exception& e) {
      // Only allocation can throw here (a huge append, say); the request fails, the
      // server and the other clients carry on.
      ReplyError(c, std::string("server error: ") + e.what(), /*close_after=*/false);
    }
  }
  if (off > 0) c.in.erase(c.in.begin(), c.in.begin() + static_cast<long>(off));
}

void TCPStoreServerLoop::Handle(Connection& c, Frame&& f) {
  const auto cmd = static_cast<Command>(f.type);
  if (!c.authed) {
    if (cmd != Command::kAuth) {
      num_rejected.fetch_add(1);
      ReplyError(c, "authentication required (set PADDLE_STORE_TOKEN)", true);
      return;
    }
    if (!ConstantTimeEquals(f.values[0], HmacSha256(token_, c.nonce))) {
      num_rejected.fetch_add(1);
      LOG(WARNING) << "TCPStoreServer: connection " << c.id << " failed authentication";
      ReplyError(c, "authentication failed: wrong PADDLE_STORE_TOKEN", true);
      return;
    }
    c.authed = true;
  }
  Frame r;
  r.type = static_cast<uint8_t>(Status::kOk);
  switch (cmd) {
    case Command::kAuth:
    case Command::kPing:
      break;
    case Command::kSet:
      Put(f.keys[0], std::move(f.values[0]));
      break;
    case Command::kGet:
    case Command::kWait:
    case Command::kMultiGet:
      HandleBlocking(c, std::move(f));
      return;
    case Command::kAdd: {
      int64_t cur = 0;
      auto it = data_.find(f.keys[0]);
      if (it != data_.end() && !ParseInt64(it->second, &cur)) {
        ReplyError(c, "add on key '" + f.keys[0] + "': its value is not an integer", false);
        return;
      }
      int64_t sum = 0;
      if (__builtin_add_overflow(cur, f.integer, &sum)) {
        ReplyError(c, "add on key '" + f.keys[0] + "' overflows int64", false);
        return;
      }
      std::string s = std::to_string(sum);
      Put(f.keys[0], std::vector<uint8_t>(s.begin(), s.end()));
      r.integer = sum;
      break;
    }
    case Command::kCompareSet: {
      auto it = data_.find(f.keys[0]);
      bool match = it == data_.end() ? f.values[0].empty() : it->second == f.values[0];
      if (match) {
        r.values.push_back(f.values[1]);
        Put(f.keys[0], std::move(f.values[1]));
      } else {
        r.values.push_back(it == data_.end() ? std::vector<uint8_t>() : it->second);
      }
      break;
    }
    case Command::kCheck:
      r.integer = Missing(f.keys).empty() ? 1 : 0;
      break;
    case Command::kDeleteKey:
      r.integer = data_.erase(f.keys[0]) ? 1 : 0;
      break;
    case Command::kNumKeys:
      r.integer = static_cast<int64_t>(data_.size());
      break;
    case Command::kAppend: {
      auto& v = data_[f.keys[0]];
      if (v.size() + f.values[0].size() > tcpstore::kMaxValueBytes) {
        ReplyError(c, "append on key '" + f.keys[0] + "' would exceed the value limit", false);
        return;
      }
      v.insert(v.end(), f.values[0].begin(), f.values[0].end());
      Notify(f.keys[0]);
      break;
    }
    case Command::kMultiSet:
      for (size_t i = 0; i < f.keys.size(); ++i) Put(f.keys[i], std::move(f.values[i]));
      break;
    case Command::kSetOnClose:
      if (f.values.empty()) {
        c.on_close.erase(f.keys[0]);
      } else {
        c.on_close[f.keys[0]] = std::move(f.values[0]);
      }
      break;
  }
  Reply(c, std::move(r));
}

void TCPStoreServerLoop::HandleBlocking(Connection& c, Frame&& f) {
  std::vector<std::string> missing = Missing(f.keys);
  int64_t ms = std::min(f.integer, kMaxWaitMs);
  c.has_pending = true;
  NoteActivity(c);
  c.pending.request = std::move(f);
  c.pending.deadline = Clock::now() + std::chrono::milliseconds(ms);
  if (missing.empty()) {
    CompletePending(c);
    return;
  }
  if (ms == 0) {  // a zero timeout answers at once instead of waiting a poll round
    ExpireDeadlines();
    return;
  }
  for (const auto& k : missing) waiters_[k].insert(c.id);
}

void TCPStoreServerLoop::CompletePending(Connection& c) {
  Unregister(c);
  Frame& req = c.pending.request;
  Frame r;
  r.type = static_cast<uint8_t>(Status::kOk);
  if (req.type != static_cast<uint8_t>(Command::kWait)) {
    for (const auto& k : req.keys) r.values.push_back(data_.at(k));
  }
  c.has_pending = false;
  NoteActivity(c);
  c.pending.request = Frame();
  Reply(c, std::move(r));
  runnable_.push_back(c.id);  // pipelined requests behind the parked one may now run
}

void TCPStoreServerLoop::ExpireDeadlines() {
  auto now = Clock::now();
  for (auto& kv : conns_) {
    Connection& c = kv.second;
    if (!c.has_pending || c.dead || c.pending.deadline > now) continue;
    Unregister(c);
    Frame r;
    r.type = static_cast<uint8_t>(Status::kTimeout);
    r.keys = Missing(c.pending.request.keys);
    c.has_pending = false;
    NoteActivity(c);
    c.pending.request = Frame();
    Reply(c, std::move(r));
    runnable_.push_back(c.id);
  }
}

void TCPStoreServerLoop::DrainRunnable() {
  while (!runnable_.empty()) {
    std::vector<uint64_t> ids;
    ids.swap(runnable_);
    for (uint64_t id : ids) {
      auto it = conns_.find(id);
      if (it == conns_.end() || it->second.dead) continue;
      Connection& c = it->second;
      if (c.has_pending) {
        std::vector<std::string> missing = Missing(c.pending.request.keys);
        if (missing.empty()) {
          CompletePending(c);
        } else {  // a key was deleted again before we got here: keep waiting
          for (const auto& k : missing) waiters_[k].insert(c.id);
        }
        continue;
      }
      ProcessInput(c);
    }
  }
}

void TCPStoreServerLoop::Put(const std::string& key, std::vector<uint8_t> value) {
  data_[key] = std::move(value);
  Notify(key);
}

void TCPStoreServerLoop::Notify(const std::string& key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  runnable_.insert(runnable_.end(), it->second.begin(), it->second.end());
  waiters_.erase(it);
}

std::vector<std::string> TCPStoreServerLoop::Missing(const std::vector<std::string>& keys) const {
  std::vector<std::string> missing;
  for (const auto& k : keys) {
    if (!data_.count(k)) missing.push_back(k);
  }
  return missing;
}

void TCPStoreServerLoop::Unregister(Connection& c) {
  if (!c.has_pending) return;
  for (const auto& k : c.pending.request.keys) {
    auto it = waiters_.find(k);
    if (it == waiters_.end()) continue;
    it->second.erase(c.id);
    if (it->second.empty()) waiters_.erase(it);
  }
}

void TCPStoreServerLoop::Reply(Connection& c, Frame&& f) {
  std::string err;
  if (!tcpstore::EncodeFrame(f, &c.out, &err)) {
    Frame e;
    e.type = static_cast<uint8_t>(Status::kError);
    e.values.emplace_back(err.begin(), err.end());
    tcpstore::EncodeFrame(e, &c.out, &err);
  }
  Flush(c);
}

void TCPStoreServerLoop::ReplyError(Connection& c, const std::string& msg, bool close_after) {
  Frame e;
  e.type = static_cast<uint8_t>(Status::kError);
  e.values.emplace_back(msg.begin(), msg.end());
  if (close_after) c.close_after_flush = true;
  Reply(c, std::move(e));
}

void TCPStoreServerLoop::Flush(Connection& c) {
  while (c.out_off < c.out.size()) {
    ssize_t n = send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (n > 0) {
      c.out_off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    c.dead = true;  // EPIPE/ECONNRESET: the client is gone
    return;
  }
  c.out.clear();
  c.out_off = 0;
  if (c.close_after_flush) c.dead = true;
}

// ------------------------------------------------------------------------ TCPStoreServer

TCPStoreServer::TCPStoreServer() : token_(StoreTokenFromEnv()) {}
TCPStoreServer::TCPStoreServer(std::string token) : token_(std::move(token)) {}
TCPStoreServer::TCPStoreServer(const std::string& host, uint16_t port)
    : token_(StoreTokenFromEnv()) {
  Start(host, port);
}
TCPStoreServer::~TCPStoreServer() { Stop(); }

void TCPStoreServer::Start(const std::string& host, uint16_t port) {
  std::string err;
  int fd = tcputils::Listen(host, port, &err);
  if (fd < 0) {
    PADDLE_THROW(errors::Unavailable("TCPStoreServer cannot listen on %s: %s",
                                     tcputils::HostPort(host, port).c_str(), err.c_str()));
  }
  StartWithListeningFd(fd, host);
}

void TCPStoreServer::StartWithListeningFd(int fd, const std::string& host) {
  std::lock_guard<std::mutex> lock(mu_);
  if (running_.load()) {
    close(fd);
    PADDLE_THROW(errors::PreconditionNotMet("TCPStoreServer on %s is already running",
                                            tcputils::HostPort(host_, port_).c_str()));
  }
  tcputils::SetNonBlocking(fd);
  host_ = host;
  port_ = tcputils::LocalPort(fd);
  loop_ = std::make_shared<TCPStoreServerLoop>(fd, token_);
  running_.store(true);
  auto loop = loop_;
  thread_ = std::thread([loop] { loop->Run(); });
  VLOG(1) << "TCPStoreServer listening on " << tcputils::HostPort(host_, port_)
          << (token_.empty() ? " (open, no PADDLE_STORE_TOKEN)" : " (token required)");
}

void TCPStoreServer::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!running_.load()) return;
  loop_->RequestStop();
  if (thread_.joinable()) thread_.join();
  loop_.reset();
  running_.store(false);
}

size_t TCPStoreServer::num_connections() const {
  std::lock_guard<std::mutex> lock(mu_);
  return loop_ ? loop_->num_connections.load() : 0;
}

std::vector<TCPStoreServer::Client> TCPStoreServer::Clients() const {
  std::lock_guard<std::mutex> lock(mu_);
  return loop_ ? loop_->Clients() : std::vector<Client>{};
}

size_t TCPStoreServer::num_rejected() const {
  std::lock_guard<std::mutex> lock(mu_);
  return loop_ ? loop_->num_rejected.load() : 0;
}

}  // namespace distributed
}  // namespace phi
