// TCPStore: the Store every rank reaches over TCP (Paddle's and c10d's TCPStore).
//
// is_master starts a TCPStoreServer inside this process on host:port (port 0 = a free one,
// see port()); every instance, master included, is a client of that server. Clients
// connect with retries and exponential backoff until the timeout, so ranks may start in any
// order. With world_size > 0 every instance registers once and the master's constructor
// returns only when world_size instances have registered (Paddle's waitWorkers).
//
// Errors name host:port, the operation and key, and the time elapsed. A get() or wait() on
// a key that does not appear within the timeout raises phi::TimeoutError naming the keys; a
// lost connection raises phi::UnavailableError. One TCPStore may be shared by threads;
// requests are serialized on its connection.
//
// The master outlives its own failure a little: when it is destroyed, or its process exits
// (see KeepHostedStoresForOtherProcesses), while clients of other processes still use it
// (wait for a key, or sent something lately), it keeps serving them until they stop or
// FLAGS_store_host_linger_s pass. A rank 0 that failed first must not take the store with
// it while the other ranks still need it to find out and name what failed.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "phi/core/distributed/store/store.h"
#include "phi/core/distributed/store/tcp_store_protocol.h"
#include "phi/core/distributed/store/tcp_store_server.h"

namespace phi {
namespace distributed {

struct TCPStoreOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  bool is_master = false;
  // > 0: register and (master) wait for this many instances; 0: no registration.
  int world_size = 0;
  std::chrono::milliseconds timeout = Store::kDefaultTimeout;
  // The shared secret (see store_auth.h); by default PADDLE_STORE_TOKEN of this process.
  // Used by the master's server too.
  bool token_from_env = true;
  std::string token;
  // The master keeps serving other processes' clients that still use it when it ends (see
  // the top of this file). Off where the job's end is synchronized otherwise (mpirun's
  // ranks meet in MPI_Finalize: a lingering rank 0 would only hold the others there).
  bool linger = true;
};

class TCPStore : public Store {
 public:
  // Paddle's signature, timeout in seconds there, a duration here.
  TCPStore(std::string host, uint16_t port, bool is_master, int world_size,
           std::chrono::milliseconds timeout = kDefaultTimeout);
  explicit TCPStore(const TCPStoreOptions& options);
  ~TCPStore() override;

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  std::vector<uint8_t> compare_set(const std::string& key, const std::vector<uint8_t>& expected,
                                   const std::vector<uint8_t>& desired) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  using Store::wait;
  using Store::set;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  void append(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<std::vector<uint8_t>> multi_get(const std::vector<std::string>& keys) override;
  void multi_set(const std::vector<std::string>& keys,
                 const std::vector<std::vector<uint8_t>>& values) override;

  // A new client connection to the same server (never a server of its own).
  std::shared_ptr<Store> Clone() override;
  bool SetOnClose(const std::string& key, const std::vector<uint8_t>& value) override;
  void CancelSetOnClose(const std::string& key) override;

  const std::string& host() const { return host_; }
  // The server's port (the one it picked when constructed with port 0 as master).
  uint16_t port() const { return port_; }
  bool is_master() const { return server_ != nullptr; }
  // The in-process server of the master, nullptr elsewhere.
  TCPStoreServer* server() const { return server_.get(); }

  // Blocks until no client of another process uses a store this process hosts, or
  // FLAGS_store_host_linger_s have passed. For a process about to exit without
  // running destructors (the watchdog's abort); a master's destructor does the same.
  static void KeepHostedStoresForOtherProcesses();

 private:
  void Connect();
  void Authenticate(const tcpstore::Frame& hello);
  void WaitForWorkers(int world_size);
  // One round trip. `what` describes the operation for error messages ("get('k')");
  // `wait_ms` is the server-side wait the request asks for (the client allows it plus a
  // grace period before it gives up on the server).
  tcpstore::Frame Request(tcpstore::Frame&& request, const std::string& what,
                          std::chrono::milliseconds wait_ms);
  tcpstore::Frame ReadFrame(std::chrono::steady_clock::time_point deadline,
                            const std::string& what,
                            std::chrono::steady_clock::time_point started);
  [[noreturn]] void Fail(const std::string& what, std::chrono::steady_clock::time_point started,
                         const std::string& why);
  std::string Where() const;
  void CloseSocket();
  void LingerWhileOtherProcessesAreConnected();

  std::string host_;
  uint16_t port_;
  std::string token_;
  std::unique_ptr<TCPStoreServer> server_;
  std::mutex mu_;  // one request in flight per connection
  int fd_ = -1;
  std::string local_endpoint_;  // this client's "ip:port", registered as in-process
  bool linger_ = true;
  std::vector<uint8_t> rbuf_;
};

}  // namespace distributed
}  // namespace phi
