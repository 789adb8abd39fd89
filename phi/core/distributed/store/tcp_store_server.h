// The TCPStore's server: one thread, one poll() loop, any number of clients.
//
// It runs inside rank 0 (TCPStore with is_master) or standalone in a launcher. Sockets are
// non-blocking and every connection has its own input and output buffer, so a slow, stuck,
// malformed or killed client costs only its own connection. Blocking requests (get, wait,
// multi_get) park on the server with their deadline: a set wakes exactly the waiters of that
// key, and an expired deadline answers kTimeout naming the keys still missing. Clients never
// poll.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace phi {
namespace distributed {

class TCPStoreServerLoop;  // the poll loop and the key-value state, in the .cc

class TCPStoreServer {
 public:
  // Token: "" = open store. By default, PADDLE_STORE_TOKEN of this process.
  TCPStoreServer();
  explicit TCPStoreServer(std::string token);
  // Convenience: construct (token from the environment) and Start(host, port).
  TCPStoreServer(const std::string& host, uint16_t port);
  ~TCPStoreServer();
  TCPStoreServer(const TCPStoreServer&) = delete;
  TCPStoreServer& operator=(const TCPStoreServer&) = delete;

  // Binds exactly host:port (port 0 = a free port, see port()) and starts serving.
  // Raises phi::UnavailableError naming host:port when the address cannot be bound.
  void Start(const std::string& host, uint16_t port);
  // Serves on a socket someone else bound and listened on (a launcher that reserved the
  // port before spawning ranks). Takes ownership of fd.
  void StartWithListeningFd(int fd, const std::string& host = "");
  // Stops the loop, closes every connection. Idempotent; the destructor calls it.
  void Stop();

  bool running() const { return running_.load(); }
  const std::string& host() const { return host_; }
  uint16_t port() const { return port_; }
  bool auth_required() const { return !token_.empty(); }

  // Introspection for tests and the launcher.
  size_t num_connections() const;
  // Connections closed because they sent a malformed frame or failed authentication.
  size_t num_rejected() const;
  // Every open connection: its peer address, how long since it last sent anything, and
  // whether it waits for a key now.
  struct Client {
    std::string endpoint;  // "ip:port"
    std::chrono::milliseconds idle{0};
    bool waiting = false;
  };
  std::vector<Client> Clients() const;

 private:
  std::string token_;
  std::string host_;
  uint16_t port_ = 0;
  std::atomic<bool> running_{false};
  std::shared_ptr<TCPStoreServerLoop> loop_;
  std::thread thread_;
  mutable std::mutex mu_;  // serializes Start/Stop and the introspection above
};

}  // namespace distributed
}  // namespace phi
