// The point-to-point endpoint's API (p2p_transport_internal.h) and the transport's helpers;
// the state it drives on the reactor thread is in p2p_transport_state_internal.h.
#include "phi/core/distributed/p2p_transport_internal.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <random>
#include <sstream>

#include <glog/logging.h>

#include "phi/core/distributed/p2p_transport_state_internal.h"
#include "phi/core/distributed/peer_connection_internal.h"
#include "phi/core/distributed/shm_group.h"
#include "phi/core/distributed/spin_policy.h"
#include "phi/core/distributed/store/tcp_utils.h"
#include "phi/core/errors.h"
#include "phi/core/flags.h"

namespace phi {
namespace distributed {
namespace p2p {

bool KnownDtype(int32_t d) {
  return d > static_cast<int32_t>(DataType::UNDEFINED) &&
         d <= static_cast<int32_t>(DataType::COMPLEX128);
}

void Finish(P2PDone& done, std::exception_ptr e) {
  if (!done) return;
  P2PDone d = std::move(done);
  done = nullptr;
  try {
    d(std::move(e));
  } catch (const std::exception& ex) {
    LOG(ERROR) << "point-to-point completion raised: " << ex.what();
  }
}

void Tune(int fd) {
  tcputils::SetNoDelay(fd);
  int size = kSocketBuffer;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
}

std::atomic<uint64_t> lent_bytes_received{0};
std::atomic<uint64_t> channel_bytes_received{0};

std::string Spec(int64_t count, DataType dtype) {
  return std::to_string(count) + " elements of " + DataTypeToString(dtype);
}

}  // namespace p2p

namespace {
uint64_t RandomNonce() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ 0x5bd1e9955bd1e995ull;
}
std::string AddressKey(int rank) { return "p2p/" + std::to_string(rank); }
}  // namespace

P2PEndpoint::P2PEndpoint(std::shared_ptr<Store> store, int rank, int size,
                         const std::string& host, std::string describe,
                         std::chrono::milliseconds timeout,
                         std::function<std::string(const std::string&)> explain)
    : state_(std::make_shared<State>()), store_(std::move(store)), dialed_(size, false) {
  State& s = *state_;
  s.reactor = P2PReactor::Get();
  s.rank = rank;
  s.size = size;
  s.describe = std::move(describe);
  s.timeout_ms.store(timeout.count());
  s.explain = std::move(explain);
  s.out.resize(size);
  s.in.resize(size);
  s.out_broken.resize(size);
  s.in_broken.resize(size);
  s.lend_to.resize(size, false);
  if (size < 2) return;
  s.host_value = ShmGroup::HostValue();
  std::string error;
  s.listen_fd = tcputils::Listen(host, 0, &error);
  PADDLE_ENFORCE(s.listen_fd >= 0,
                 errors::Unavailable("%s: cannot listen on %s for point-to-point messages: %s",
                                     s.describe.c_str(), host.c_str(), error.c_str()));
  s.nonce = RandomNonce();
  std::ostringstream value;
  value << host << ' ' << tcputils::LocalPort(s.listen_fd) << ' ' << s.nonce << ' '
        << s.host_value;
  try {
    store_->set(AddressKey(rank), value.str());
  } catch (...) {
    ::close(s.listen_fd);
    throw;
  }
  State* raw = state_.get();
  s.reactor->PostAndWait([raw] {
    raw->listen_token = raw->reactor->Watch(raw->listen_fd, EPOLLIN, [raw](uint32_t) {
      raw->OnAccept();
    });
    raw->timer_id =
        raw->reactor->AddTimer([raw](p2p::Clock::time_point now) { return raw->Expire(now); });
    raw->poll_hook_id = raw->reactor->AddPollHook([raw] { raw->PollChannels(); });
  });
}

P2PEndpoint::~P2PEndpoint() {
  auto s = state_;
  s->reactor->PostAndWait([s] { s->Close("the communicator was destroyed"); });
}

void P2PEndpoint::SetTimeout(std::chrono::milliseconds timeout) {
  state_->timeout_ms.store(timeout.count());
}

void P2PEndpoint::Abort(const std::string& why) {
  auto s = state_;
  s->closed_flag.store(true);
  s->reactor->Post([s, why] { s->Close("aborted: " + why); });
}

void P2PEndpoint::Prepare(int peer) {
  State& s = *state_;
  if (peer == kAnyPeer) return;  // receives need no connection of their own
  std::lock_guard<std::mutex> lk(dial_mu_);
  if (dialed_[peer]) return;
  PADDLE_ENFORCE(!s.closed_flag.load(),
                 errors::Unavailable("%s: the communicator was aborted or destroyed",
                                     s.describe.c_str()));
  const auto deadline = p2p::Clock::now() + std::chrono::milliseconds(s.timeout_ms.load());
  uint64_t nonce = 0;
  std::string peer_host;
  const int fd = DialPublishedAddress(store_.get(), AddressKey(peer), peer, deadline,
                                      [&s] { return s.closed_flag.load(); }, s.describe, &nonce,
                                      &peer_host);
  const bool lend = ShmGroup::SharesMemory(peer_host, s.host_value);
  std::string error;
  p2p::Tune(fd);
  // A peer on this host gets this connection's bytes through shared memory (the socket
  // carries the hello, then doorbells); where no segment can be made, through the socket.
  std::shared_ptr<ShmChannel> channel;
  std::vector<uint8_t> hello_bytes(sizeof(p2p::Hello));
  if (lend) {
    std::string name, why;
    channel = ShmChannel::Create(&name, &why);
    if (channel) {
      hello_bytes.resize(sizeof(p2p::Hello) + ShmChannel::kNameBytes, 0);
      std::memcpy(hello_bytes.data() + sizeof(p2p::Hello), name.data(), name.size());
    } else {
      LOG(WARNING) << s.describe << ": point-to-point messages to rank " << peer
                   << " go through the socket: " << why;
    }
  }
  const p2p::Hello hello{channel ? p2p::kHelloShmMagic : p2p::kHelloMagic, s.rank, nonce};
  std::memcpy(hello_bytes.data(), &hello, sizeof(hello));
  if (!tcputils::SendAll(fd, hello_bytes.data(), hello_bytes.size(), deadline, &error)) {
    ::close(fd);
    PADDLE_THROW(errors::Unavailable("%s: greeting rank %d failed: %s", s.describe.c_str(),
                                     peer, error.c_str()));
  }
  auto st = state_;
  st->reactor->Post([st, peer, fd, lend, channel] { st->AdoptOut(peer, fd, lend, channel); });
  dialed_[peer] = true;
}

void P2PEndpoint::PostSend(const void* data, int64_t count, DataType dtype, int peer, int tag,
                           P2PDone done) {
  p2p::SendOp op;
  op.peer = peer;
  op.tag = tag;
  op.dtype = dtype;
  op.count = count;
  op.data = static_cast<const char*>(data);
  op.bytes = static_cast<size_t>(count) * SizeOf(dtype);
  op.deadline = state_->Deadline();
  op.done = std::move(done);
  try {
    Prepare(peer);
  } catch (...) {
    return p2p::Finish(op.done, std::current_exception());
  }
  auto s = state_;
  s->reactor->RunOrPost([s, op = std::move(op)]() mutable { s->DoSend(std::move(op)); });
}

void P2PEndpoint::PostRecv(void* data, int64_t count, DataType dtype, int peer, int tag,
                           int* source, P2PDone done) {
  p2p::RecvOp op;
  op.peer = peer;
  op.tag = tag;
  op.dtype = dtype;
  op.count = count;
  op.dst = static_cast<char*>(data);
  op.bytes = static_cast<size_t>(count) * SizeOf(dtype);
  op.source = source;
  op.deadline = state_->Deadline();
  op.done = std::move(done);
  auto s = state_;
  s->reactor->RunOrPost([s, op = std::move(op)]() mutable { s->DoRecv(std::move(op)); });
}

std::shared_ptr<P2PReactor> P2PEndpoint::Reactor() const { return state_->reactor; }

uint64_t P2PLentBytesReceived() { return p2p::lent_bytes_received.load(); }

uint64_t P2PChannelBytesReceived() { return p2p::channel_bytes_received.load(); }

void RunP2POps(P2PEndpoint* endpoint, const std::vector<PendingCpuP2P>& ops,
               std::chrono::milliseconds timeout) {
  struct Waiter {
    std::mutex mu;
    std::condition_variable cv;
    size_t left = 0;
    std::exception_ptr first;
    std::atomic<bool> all_done{false};  // what the spin reads
  };
  auto w = std::make_shared<Waiter>();
  w->left = ops.size();
  auto done = [w](std::exception_ptr e) {
    std::lock_guard<std::mutex> lk(w->mu);
    if (e && !w->first) w->first = e;
    if (--w->left == 0) {
      w->all_done.store(true, std::memory_order_release);
      w->cv.notify_all();
    }
  };
  for (const auto& op : ops) {
    if (op.is_send) {
      endpoint->PostSend(op.src, op.count, op.dtype, op.peer, op.tag, done);
    } else {
      endpoint->PostRecv(op.dst, op.count, op.dtype, op.peer, op.tag, op.source, done);
    }
  }
  // The spin rule first, this thread serving the sockets itself (Progress) while the reactor
  // thread stays off them: a message that arrives completes here, with no thread woken.
  // Then block. The endpoint's deadlines end every op (the buffers are the ops' until then).
  thread_local SpinPolicy spin;
  auto all_done = [&] { return w->all_done.load(std::memory_order_acquire); };
  std::shared_ptr<P2PReactor> reactor = endpoint->Reactor();
  const bool spun = SpinServing(&spin, reactor.get(), all_done);
  if (spun) {
    std::lock_guard<std::mutex> lk(w->mu);
    if (w->first) std::rethrow_exception(w->first);
    return;
  }
  std::unique_lock<std::mutex> lk(w->mu);
  while (!w->cv.wait_for(lk, timeout + std::chrono::seconds(10), [&] { return w->left == 0; })) {
    LOG(ERROR) << w->left << " point-to-point op(s) still pending " << timeout.count()
               << " ms + 10 s after they were posted";
  }
  spin.Ended();
  if (w->first) std::rethrow_exception(w->first);
}

}  // namespace distributed
}  // namespace phi
