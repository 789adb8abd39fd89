#include "phi/core/distributed/store/tcp_store.h"

#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "phi/core/distributed/store/store_auth.h"
#include "phi/core/distributed/store/tcp_store_host_internal.h"
#include "phi/core/distributed/store/tcp_utils.h"
#include "phi/core/errors.h"

namespace phi {
namespace distributed {

using tcpstore::Command;
using tcpstore::Frame;
using tcpstore::Status;
using Clock = std::chrono::steady_clock;

namespace {
constexpr const char* kWorkersKey = "__tcpstore_init/workers";
constexpr const char* kWorkersDoneKey = "__tcpstore_init/done";
// How long past a server-side wait the client still waits for the answer before it
// declares the server unresponsive.
constexpr std::chrono::milliseconds kReplyGrace{5000};

int64_t MsSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

std::string Quote(const std::string& key) { return "'" + key + "'"; }

std::string KeyList(const std::vector<std::string>& keys) {
  std::string s;
  for (size_t i = 0; i < keys.size() && i < 16; ++i) s += (i ? ", " : "") + Quote(keys[i]);
  if (keys.size() > 16) s += ", ... (" + std::to_string(keys.size()) + " keys)";
  return s;
}

Frame MakeRequest(Command cmd, std::vector<std::string> keys = {},
                  std::vector<std::vector<uint8_t>> values = {}, int64_t integer = 0) {
  Frame f;
  f.type = static_cast<uint8_t>(cmd);
  f.keys = std::move(keys);
  f.values = std::move(values);
  f.integer = integer;
  return f;
}
}  // namespace

TCPStore::TCPStore(std::string host, uint16_t port, bool is_master, int world_size,
                   std::chrono::milliseconds timeout)
    : TCPStore([&] {
        TCPStoreOptions o;
        o.host = std::move(host);
        o.port = port;
        o.is_master = is_master;
        o.world_size = world_size;
        o.timeout = timeout;
        return o;
      }()) {}

TCPStore::TCPStore(const TCPStoreOptions& o)
    : Store(o.timeout), host_(o.host), port_(o.port), linger_(o.linger) {
  PADDLE_ENFORCE_GE(o.timeout.count(), 0,
                    errors::InvalidArgument("TCPStore timeout must not be negative"));
  token_ = (o.token.empty() && o.token_from_env) ? StoreTokenFromEnv() : o.token;
  if (o.is_master) {
    server_ = std::make_unique<TCPStoreServer>(token_);
    server_->Start(host_, port_);
    port_ = server_->port();
  }
  Connect();
  if (o.world_size > 0) WaitForWorkers(o.world_size);
  // Registered only once constructed: a constructor that throws runs no destructor.
  if (o.is_master && linger_) storehost::RegisterMaster(this);
}

std::shared_ptr<Store> TCPStore::Clone() {
  TCPStoreOptions o;
  o.host = host_;
  o.port = port_;
  o.timeout = timeout_;
  o.token_from_env = false;
  o.token = token_;
  return std::make_shared<TCPStore>(o);
}

TCPStore::~TCPStore() {
  CloseSocket();
  if (server_) {
    storehost::UnregisterMaster(this);
    if (linger_) LingerWhileOtherProcessesAreConnected();
  }
  server_.reset();  // the master's server goes last: the other ranks may still be talking
}

std::string TCPStore::Where() const { return "TCPStore " + tcputils::HostPort(host_, port_); }

void TCPStore::CloseSocket() {
  if (!local_endpoint_.empty()) {
    storehost::ForgetClientEndpoint(local_endpoint_);
    local_endpoint_.clear();
  }
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  rbuf_.clear();
}

void TCPStore::Fail(const std::string& what, Clock::time_point started, const std::string& why) {
  CloseSocket();  // the stream's framing is unknown now; never reuse it
  PADDLE_THROW(errors::Unavailable("%s: %s failed after %lld ms: %s", Where().c_str(),
                                   what.c_str(), static_cast<long long>(MsSince(started)),
                                   why.c_str()));
}

void TCPStore::Connect() {
  const auto started = Clock::now();
  const auto deadline = started + timeout_;
  auto backoff = std::chrono::milliseconds(10);
  std::string last;
  int attempts = 0;
  for (;;) {
    ++attempts;
    auto attempt_deadline = std::min(deadline, Clock::now() + std::chrono::seconds(10));
    int fd = tcputils::ConnectOnce(host_, port_, attempt_deadline, &last);
    if (fd >= 0) {
      fd_ = fd;
      rbuf_.clear();
      local_endpoint_ = tcputils::Endpoint(fd, /*peer=*/false);
      if (!local_endpoint_.empty()) {
        storehost::NoteClientEndpoint(local_endpoint_);
      }
      try {
        Frame hello = ReadFrame(attempt_deadline, "connect", started);
        if (hello.type != static_cast<uint8_t>(Status::kHello) || hello.keys.empty() ||
            hello.keys[0] != tcpstore::kProtocolName) {
          CloseSocket();
          PADDLE_THROW(errors::External(
              "%s: the peer is not a paddle_like TCPStore server (expected protocol %s)",
              Where().c_str(), tcpstore::kProtocolName));
        }
        if (hello.integer == 1) Authenticate(hello);
        VLOG(3) << Where() << ": connected after " << attempts << " attempt(s)";
        return;
      } catch (const UnavailableError& e) {
        // The server accepted and went away (it was shutting down, or restarting): retry.
        last = e.what();
      }
    }
    const auto now = Clock::now();
    if (now >= deadline) break;
    // The last sleep is cut to the deadline so the final attempt happens at it.
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
  PADDLE_THROW(errors::Timeout(
      "%s: could not connect within the timeout of %lld ms (%d attempts, %lld ms elapsed); "
      "last error: %s",
      Where().c_str(), static_cast<long long>(timeout_.count()), attempts,
      static_cast<long long>(MsSince(started)), last.c_str()));
}

void TCPStore::Authenticate(const Frame& hello) {
  const auto started = Clock::now();
  if (token_.empty()) {
    CloseSocket();
    PADDLE_THROW(errors::PreconditionNotMet(
        "%s requires authentication: set %s to the token the server was started with",
        Where().c_str(), kStoreTokenEnv));
  }
  if (hello.values.size() != 1 || hello.values[0].size() != tcpstore::kNonceBytes) {
    CloseSocket();
    PADDLE_THROW(errors::External("%s: malformed hello (no nonce)", Where().c_str()));
  }
  Frame auth = MakeRequest(Command::kAuth, {}, {HmacSha256(token_, hello.values[0])});
  std::vector<uint8_t> bytes;
  std::string err;
  tcpstore::EncodeFrame(auth, &bytes, &err);
  if (!tcputils::SendAll(fd_, bytes.data(), bytes.size(), started + timeout_, &err)) {
    Fail("authenticate", started, err);
  }
  Frame r = ReadFrame(started + timeout_, "authenticate", started);
  if (r.type != static_cast<uint8_t>(Status::kOk)) {
    std::string msg = r.values.empty() ? "rejected" : std::string(r.values[0].begin(),
                                                                  r.values[0].end());
    CloseSocket();
    PADDLE_THROW(errors::PreconditionNotMet("%s: authentication failed: %s", Where().c_str(),
                                            msg.c_str()));
  }
}

void TCPStore::WaitForWorkers(int world_size) {
  if (add(kWorkersKey, 1) == world_size) set(kWorkersDoneKey, std::string("1"));
  if (server_) {
    try {
      wait({kWorkersDoneKey}, timeout_);
    } catch (const TimeoutError& e) {
      PADDLE_THROW(errors::Timeout("%s: only %lld of %d workers registered within %lld ms",
                                   Where().c_str(),
                                   static_cast<long long>(add(kWorkersKey, 0)), world_size,
                                   static_cast<long long>(timeout_.count())));
    }
  }
}

Frame TCPStore::ReadFrame(Clock::time_point deadline, const std::string& what,
                          Clock::time_point started) {
  uint8_t buf[64 * 1024];
  for (;;) {
    Frame f;
    size_t used = 0;
    std::string err;
    auto st = tcpstore::ParseFrame(rbuf_.data(), rbuf_.size(), &f, &used, &err);
    if (st == tcpstore::ParseStatus::kOk) {
      rbuf_.erase(rbuf_.begin(), rbuf_.begin() + static_cast<long>(used));
      return f;
    }
    if (st == tcpstore::ParseStatus::kMalformed) {
      Fail(what, started, "malformed reply from the server: " + err);
    }
    long n = tcputils::RecvSome(fd_, buf, sizeof(buf), deadline, &err);
    if (n == 0) Fail(what, started, "the server closed the connection");
    if (n == -2) {
      CloseSocket();
      PADDLE_THROW(errors::Timeout("%s: %s got no reply within %lld ms; the server is "
                                   "unresponsive",
                                   Where().c_str(), what.c_str(),
                                   static_cast<long long>(MsSince(started))));
    }
    if (n < 0) Fail(what, started, err);
    rbuf_.insert(rbuf_.end(), buf, buf + n);
  }
}

Frame TCPStore::Request(Frame&& request, const std::string& what,
                        std::chrono::milliseconds wait_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto started = Clock::now();
  if (fd_ < 0) {
    Fail(what, started, "the connection was closed by an earlier error");
  }
  std::vector<uint8_t> bytes;
  std::string err;
  if (!tcpstore::EncodeFrame(request, &bytes, &err)) {
    PADDLE_THROW(errors::InvalidArgument("%s: %s: %s", Where().c_str(), what.c_str(),
                                         err.c_str()));
  }
  auto io_deadline = started + std::max(timeout_, std::chrono::milliseconds(1000));
  if (!tcputils::SendAll(fd_, bytes.data(), bytes.size(), io_deadline, &err)) {
    Fail(what, started, err);
  }
  Frame r = ReadFrame(io_deadline + wait_ms + kReplyGrace, what, started);
  switch (static_cast<Status>(r.type)) {
    case Status::kOk:
      return r;
    case Status::kTimeout:
      PADDLE_THROW(errors::Timeout("%s: %s timed out after %lld ms (timeout %lld ms) waiting "
                                   "for key(s) %s",
                                   Where().c_str(), what.c_str(),
                                   static_cast<long long>(MsSince(started)),
                                   static_cast<long long>(wait_ms.count()),
                                   KeyList(r.keys).c_str()));
    case Status::kError: {
      std::string msg = r.values.empty() ? "" : std::string(r.values[0].begin(),
                                                            r.values[0].end());
      PADDLE_THROW(errors::InvalidArgument("%s: %s was refused by the server after %lld ms: %s",
                                           Where().c_str(), what.c_str(),
                                           static_cast<long long>(MsSince(started)),
                                           msg.c_str()));
    }
    default:
      Fail(what, started, "unexpected reply type " + std::to_string(r.type));
  }
}

void TCPStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  Request(MakeRequest(Command::kSet, {key}, {value}), "set(" + Quote(key) + ")",
          std::chrono::milliseconds(0));
}

std::vector<uint8_t> TCPStore::get(const std::string& key) {
  Frame r = Request(MakeRequest(Command::kGet, {key}, {}, timeout_.count()),
                    "get(" + Quote(key) + ")", timeout_);
  if (r.values.size() != 1) Fail("get(" + Quote(key) + ")", Clock::now(), "bad reply shape");
  return std::move(r.values[0]);
}

int64_t TCPStore::add(const std::string& key, int64_t value) {
  return Request(MakeRequest(Command::kAdd, {key}, {}, value), "add(" + Quote(key) + ")",
                 std::chrono::milliseconds(0))
      .integer;
}

std::vector<uint8_t> TCPStore::compare_set(const std::string& key,
                                           const std::vector<uint8_t>& expected,
                                           const std::vector<uint8_t>& desired) {
  Frame r = Request(MakeRequest(Command::kCompareSet, {key}, {expected, desired}),
                    "compare_set(" + Quote(key) + ")", std::chrono::milliseconds(0));
  if (r.values.size() != 1) {
    Fail("compare_set(" + Quote(key) + ")", Clock::now(), "bad reply shape");
  }
  return std::move(r.values[0]);
}

void TCPStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  Request(MakeRequest(Command::kWait, keys, {}, timeout.count()), "wait(" + KeyList(keys) + ")",
          timeout);
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  return Request(MakeRequest(Command::kCheck, keys), "check(" + KeyList(keys) + ")",
                 std::chrono::milliseconds(0))
             .integer == 1;
}

bool TCPStore::delete_key(const std::string& key) {
  return Request(MakeRequest(Command::kDeleteKey, {key}), "delete_key(" + Quote(key) + ")",
                 std::chrono::milliseconds(0))
             .integer == 1;
}

int64_t TCPStore::num_keys() {
  return Request(MakeRequest(Command::kNumKeys), "num_keys()", std::chrono::milliseconds(0))
      .integer;
}

void TCPStore::append(const std::string& key, const std::vector<uint8_t>& value) {
  Request(MakeRequest(Command::kAppend, {key}, {value}), "append(" + Quote(key) + ")",
          std::chrono::milliseconds(0));
}

std::vector<std::vector<uint8_t>> TCPStore::multi_get(const std::vector<std::string>& keys) {
  Frame r = Request(MakeRequest(Command::kMultiGet, keys, {}, timeout_.count()),
                    "multi_get(" + KeyList(keys) + ")", timeout_);
  if (r.values.size() != keys.size()) {
    Fail("multi_get(" + KeyList(keys) + ")", Clock::now(), "bad reply shape");
  }
  return std::move(r.values);
}

void TCPStore::multi_set(const std::vector<std::string>& keys,
                         const std::vector<std::vector<uint8_t>>& values) {
  PADDLE_ENFORCE_EQ(keys.size(), values.size(),
                    errors::InvalidArgument("%s: multi_set needs one value per key",
                                            Where().c_str()));
  Request(MakeRequest(Command::kMultiSet, keys, values), "multi_set(" + KeyList(keys) + ")",
          std::chrono::milliseconds(0));
}

bool TCPStore::SetOnClose(const std::string& key, const std::vector<uint8_t>& value) {
  Request(MakeRequest(Command::kSetOnClose, {key}, {value}), "set_on_close(" + key + ")",
          std::chrono::milliseconds(0));
  return true;
}

void TCPStore::CancelSetOnClose(const std::string& key) {
  Request(MakeRequest(Command::kSetOnClose, {key}, {}), "set_on_close(" + key + ", cancel)",
          std::chrono::milliseconds(0));
}

}  // namespace distributed
}  // namespace phi
