// store_bench: set/get round trips per second against a real TCPStore server, with 1 and
// with N client processes.
//
//   store_bench [--seconds S=3] [--procs 1,16] [--value-bytes B=64]
//
// For each process count the clients are forked first, then this process starts a
// TCPStoreServer on 127.0.0.1 (a free port) and hands the port over a pipe. Clients meet
// at a store barrier, then each runs set(k, v) / get(k) pairs on its own keys for S
// seconds. Every set and every get is one round trip.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "phi/core/distributed/store/tcp_store.h"
#include "phi/core/distributed/store/tcp_store_server.h"

using phi::distributed::TCPStore;
using phi::distributed::TCPStoreServer;
using Clock = std::chrono::steady_clock;

namespace {

[[noreturn]] void Client(int rank, int port_fd, double seconds, size_t value_bytes) {
  char buf[16] = {0};
  ssize_t n = read(port_fd, buf, sizeof(buf) - 1);
  if (n <= 0) _exit(2);
  const uint16_t port = static_cast<uint16_t>(std::atoi(buf));
  try {
    TCPStore store("127.0.0.1", port, false, 0, std::chrono::seconds(60));
    store.add("bench/ready", 1);
    store.wait({"bench/go"});
    const std::string key = "bench/key/" + std::to_string(rank);
    const std::vector<uint8_t> value(value_bytes, 'v');
    long long round_trips = 0;
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < end) {
      for (int i = 0; i < 64; ++i) {
        store.set(key, value);
        if (store.get(key).size() != value_bytes) _exit(3);
      }
      round_trips += 128;
    }
    store.set("bench/result/" + std::to_string(rank), std::to_string(round_trips));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "client %d: %s\n", rank, e.what());
    _exit(1);
  }
  _exit(0);
}

int RunOnce(int procs, double seconds, size_t value_bytes) {
  std::vector<pid_t> pids;
  std::vector<int> port_fds;
  std::fflush(nullptr);
  for (int r = 0; r < procs; ++r) {  // fork before this process has a server thread
    int fds[2];
    if (pipe(fds) != 0) return 1;
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[1]);
      for (int fd : port_fds) close(fd);
      Client(r, fds[0], seconds, value_bytes);
    }
    close(fds[0]);
    pids.push_back(pid);
    port_fds.push_back(fds[1]);
  }
  int failed = 0;
  {
    TCPStoreServer server("127.0.0.1", 0);
    const std::string port = std::to_string(server.port()) + "\n";
    for (int fd : port_fds) {
      if (write(fd, port.data(), port.size()) < 0) failed = 1;
      close(fd);
    }
    TCPStore control("127.0.0.1", server.port(), false, 0, std::chrono::seconds(60));
    while (control.add("bench/ready", 0) < procs) usleep(1000);
    const auto t0 = Clock::now();
    control.set("bench/go", std::string("1"));
    std::vector<std::string> keys;
    for (int r = 0; r < procs; ++r) keys.push_back("bench/result/" + std::to_string(r));
    control.set_timeout(std::chrono::seconds(static_cast<int>(seconds) + 60));
    auto results = control.multi_get(keys);
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    long long total = 0;
    for (const auto& v : results) total += std::atoll(std::string(v.begin(), v.end()).c_str());
    const double per_sec = total / elapsed;
    std::printf("%-9d %-12zu %-14.0f %-18.0f %-10.1f\n", procs, value_bytes, per_sec,
                per_sec / procs, 1e6 * procs / per_sec);
    std::fflush(stdout);
  }
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
  }
  return failed;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 3;
  size_t value_bytes = 64;
  std::vector<int> procs = {1, 16};
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--seconds") {
      seconds = std::atof(argv[i + 1]);
    } else if (a == "--value-bytes") {
      value_bytes = static_cast<size_t>(std::atoll(argv[i + 1]));
    } else if (a == "--procs") {
      procs.clear();
      std::stringstream ss(argv[i + 1]);
      std::string item;
      while (std::getline(ss, item, ',')) procs.push_back(std::atoi(item.c_str()));
    } else {
      std::fprintf(stderr, "usage: %s [--seconds S] [--procs 1,16] [--value-bytes B]\n",
                   argv[0]);
      return 2;
    }
  }
  std::printf("TCPStore set/get round trips, 127.0.0.1, %.1f s per run, %ld CPUs\n", seconds,
              sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("%-9s %-12s %-14s %-18s %-10s\n", "clients", "value_bytes", "round_trips/s",
              "per_client/s", "mean_us");
  int rc = 0;
  for (int p : procs) rc |= RunOnce(p, seconds, value_bytes);
  return rc;
}
