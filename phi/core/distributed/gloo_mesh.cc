#include "phi/core/distributed/gloo_mesh_internal.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include <gloo/common/error.h>
#include <gloo/transport/context.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/address.h>
#include <glog/logging.h>

#include "phi/core/distributed/liveness.h"
#include "phi/core/distributed/store/tcp_utils.h"
#include "phi/core/errors.h"
#include "phi/core/distributed/rank_list.h"

namespace phi {
namespace distributed {
namespace {

// gloo::Context keeps its device and transport context protected and fills them only in
// connectFullMesh; this subclass fills them without connecting anything.
class UnconnectedContext : public ::gloo::Context {
 public:
  UnconnectedContext(int rank, int size, std::shared_ptr<::gloo::transport::Device> device,
                     std::shared_ptr<::gloo::transport::Context> transport,
                     std::chrono::milliseconds timeout)
      : ::gloo::Context(rank, size) {
    device_ = std::move(device);
    transportContext_ = std::move(transport);
    setTimeout(timeout);
  }
};

// The published value: for every peer, [int32 peer][int32 n][n address bytes].
void AppendEntry(std::string* out, int32_t peer, const std::vector<char>& bytes) {
  int32_t n = static_cast<int32_t>(bytes.size());
  out->append(reinterpret_cast<const char*>(&peer), sizeof(peer));
  out->append(reinterpret_cast<const char*>(&n), sizeof(n));
  out->append(bytes.data(), bytes.size());
}

bool FindEntry(const std::vector<uint8_t>& value, int32_t want, std::vector<char>* bytes) {
  size_t at = 0;
  while (at + 8 <= value.size()) {
    int32_t peer, n;
    std::memcpy(&peer, value.data() + at, 4);
    std::memcpy(&n, value.data() + at + 4, 4);
    at += 8;
    if (n < 0 || static_cast<size_t>(n) > value.size() - at) return false;  // malformed
    if (peer == want) {
      bytes->assign(value.begin() + at, value.begin() + at + n);
      return true;
    }
    at += static_cast<size_t>(n);
  }
  return false;
}

// Pairs connect on comm-stream and lane threads while the program may block on the same
// store (its own waits, another group's creation): the mesh talks to the store over a
// connection of its own where the store has connections.
std::shared_ptr<Store> OwnConnection(const std::shared_ptr<Store>& store) {
  std::shared_ptr<Store> own = store->Clone();
  return own ? own : store;
}

// "10.77.0.2" from "10.77.0.2:41235$7" / "[fe80::1]:41235": the host part of a Gloo address
// (Gloo appends "$<sequence number>" to a pair's address).
std::string HostOf(std::string address) {
  address = address.substr(0, address.find('$'));
  std::string host, port;
  return tcputils::SplitHostPort(address, &host, &port) ? host : address;
}

}  // namespace

GlooMesh::GlooMesh(std::shared_ptr<Store> store, int rank, int size,
                   std::shared_ptr<::gloo::transport::Device> device,
                   std::chrono::milliseconds timeout, std::string describe, int liveness_gid)
    : store_(OwnConnection(store)),
      own_store_(store_ != store),
      rank_(rank),
      size_(size),
      liveness_gid_(liveness_gid),
      timeout_(timeout),
      describe_(std::move(describe)),
      device_(std::move(device)),
      connected_(static_cast<size_t>(size), 0) {
  transport_ = device_->createContext(rank, size);
  transport_->setTimeout(timeout);
  std::string mine;
  for (int r = 0; r < size; ++r) {
    peer_mu_.push_back(std::make_unique<std::mutex>());
    if (r == rank) continue;
    auto& pair = transport_->createPair(r);
    AppendEntry(&mine, r, pair->address().bytes());
    if (my_host_.empty()) my_host_ = HostOf(pair->address().str());
  }
  store_->set(AddrKey(rank), mine);
  context_ = std::make_shared<UnconnectedContext>(rank, size, device_, transport_, timeout);
}

GlooMesh::~GlooMesh() = default;

std::string GlooMesh::AddrKey(int rank) const { return "addr/" + std::to_string(rank); }

void GlooMesh::WaitKeys(const std::vector<std::string>& keys) {
  // In short slices: lanes of this mesh share its connection, and one lane waiting for a
  // slow peer must not hold up another lane's lookup of a peer that is already there.
  const auto deadline = std::chrono::steady_clock::now() + timeout_.load();
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    try {
      store_->wait(keys, std::max(std::chrono::milliseconds(1),
                                  std::min(left, std::chrono::milliseconds(50))));
      return;
    } catch (const TimeoutError&) {
      if (std::chrono::steady_clock::now() >= deadline) throw;
    }
  }
}

void GlooMesh::EnsurePeer(int peer) {
  std::lock_guard<std::mutex> lk(*peer_mu_[static_cast<size_t>(peer)]);
  if (!connected_[static_cast<size_t>(peer)]) ConnectLocked(peer);
}

void GlooMesh::EnsureAll() {
  if (all_connected_.load(std::memory_order_acquire)) return;
  // One wait for all first, so that a timeout names every rank that is missing.
  std::vector<std::string> keys;
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) keys.push_back(AddrKey(r));
  }
  if (!keys.empty()) {
    try {
      WaitKeys(keys);
    } catch (const TimeoutError&) {
      std::vector<int> missing_ranks;
      for (int r = 0; r < size_; ++r) {
        if (r != rank_ && !store_->check({AddrKey(r)})) missing_ranks.push_back(r);
      }
      const std::string missing = JoinRanks(missing_ranks);
      PADDLE_THROW(errors::Timeout(
          "%s: rank(s) %s did not create this group within the group's timeout of %lld ms "
          "(they died, hang, or never create it).%s",
          describe_.c_str(), missing.c_str(), static_cast<long long>(timeout_.load().count()),
          Liveness::Process().About(liveness_gid_, missing_ranks).c_str()));
    }
  }
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) EnsurePeer(r);
  }
  all_connected_.store(true, std::memory_order_release);
}

void GlooMesh::ConnectLocked(int peer) {
  try {
    WaitKeys({AddrKey(peer)});
  } catch (const TimeoutError&) {
    PADDLE_THROW(errors::Timeout(
        "%s: rank %d did not create this group within the group's timeout of %lld ms (it "
        "died, hangs, or never creates it).%s",
        describe_.c_str(), peer, static_cast<long long>(timeout_.load().count()),
        Liveness::Process().About(liveness_gid_, {peer}).c_str()));
  }
  std::vector<char> bytes;
  PADDLE_ENFORCE(FindEntry(store_->get(AddrKey(peer)), rank_, &bytes),
                 errors::External("%s: rank %d published no Gloo address for rank %d "
                                  "(malformed rendezvous entry).",
                                  describe_.c_str(), peer, rank_));
  try {
    transport_->getPair(peer)->connect(bytes);
  } catch (const ::gloo::IoException& e) {
    PADDLE_THROW(errors::Unavailable("%s: connecting to rank %d failed: %s", describe_.c_str(),
                                     peer, e.what()));
  } catch (const std::exception& e) {  // gloo::Exception, gloo::EnforceNotMet
    PADDLE_THROW(errors::External("%s: connecting to rank %d failed: %s", describe_.c_str(),
                                  peer, e.what()));
  }
  {
    std::lock_guard<std::mutex> lk(names_mu_);
    peer_by_address_[::gloo::transport::tcp::Address(bytes).str()] = peer;
    if (HostOf(::gloo::transport::tcp::Address(bytes).str()) != my_host_) {
      remote_peers_.push_back(peer);
    }
  }
  connected_[static_cast<size_t>(peer)] = 1;
  VLOG(2) << describe_ << ": connected to rank " << peer;
}

void GlooMesh::CloseConnected() {
  std::vector<std::unique_lock<std::mutex>> locks;
  std::vector<int> peers;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    std::unique_lock<std::mutex> lk(*peer_mu_[static_cast<size_t>(r)], std::try_to_lock);
    if (!lk.owns_lock() || !connected_[static_cast<size_t>(r)]) continue;
    peers.push_back(r);
    locks.push_back(std::move(lk));
  }
  for (int r : peers) {
    try {
      transport_->getPair(r)->close();
    } catch (const std::exception& e) {
      VLOG(1) << describe_ << ": closing the pair with rank " << r << ": " << e.what();
    }
  }
}

std::string GlooMesh::NamePeersIn(const std::string& msg) const {
  std::string names;
  std::lock_guard<std::mutex> lk(names_mu_);
  for (const auto& kv : peer_by_address_) {
    size_t at = msg.find(kv.first);
    size_t next = at + kv.first.size();
    if (at != std::string::npos && (next >= msg.size() || !std::isdigit(msg[next]))) {
      names += " [the peer at " + kv.first + " is rank " + std::to_string(kv.second) + "]";
    }
  }
  return names;
}

}  // namespace distributed
}  // namespace phi
