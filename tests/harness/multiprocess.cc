#include "tests/harness/multiprocess.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <thread>

#include "phi/core/distributed/store/tcp_store.h"
#include "phi/core/distributed/store/tcp_store_server.h"

namespace paddle_like {
namespace testing {
namespace {

using Clock = std::chrono::steady_clock;

// Failed assertions recorded in the current test so far (in this process). Counting, not
// HasFailure(), so a failure of the parent test before the fork is not blamed on a rank.
int FailureCount() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (!info) return ::testing::Test::HasFailure() ? 1 : 0;
  const ::testing::TestResult* result = info->result();
  int n = 0;
  for (int i = 0; i < result->total_part_count(); ++i) {
    if (result->GetTestPartResult(i).failed()) ++n;
  }
  return n;
}

void FlushAll() {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
}

[[noreturn]] void ChildExit(int code) {
  FlushAll();
  _exit(code);  // no atexit handlers, no gtest teardown, no static destructors
}

// Reads "<port>\n" from the parent; 0 when the parent gave up (closed the pipe).
int ReadPort(int fd, std::chrono::milliseconds timeout) {
  std::string buf;
  auto deadline = Clock::now() + timeout;
  while (buf.find('\n') == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    int ms = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (ms <= 0) return 0;
    int rc = poll(&p, 1, ms);
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) return 0;
    char c[16];
    ssize_t n = read(fd, c, sizeof(c));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;
    buf.append(c, static_cast<size_t>(n));
  }
  return std::atoi(buf.c_str());
}

[[noreturn]] void RunChild(int rank, int world_size, int port_fd,
                           const std::function<void(const RankContext&)>& fn,
                           const SpawnOptions& opts) {
  int port = ReadPort(port_fd, opts.timeout);
  close(port_fd);
  if (port <= 0) {
    std::fprintf(stderr, "[rank %d] harness: no store port from the parent\n", rank);
    ChildExit(kChildSetupFailed);
  }
  for (const auto& kv : opts.env) setenv(kv.first.c_str(), kv.second.c_str(), 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  setenv("RANK", std::to_string(rank).c_str(), 1);
  setenv("WORLD_SIZE", std::to_string(world_size).c_str(), 1);
  setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
  setenv("PADDLE_STORE_HOSTED", "1", 1);

  RankContext ctx;
  ctx.rank = rank;
  ctx.world_size = world_size;
  ctx.host = "127.0.0.1";
  ctx.port = port;
  try {
    phi::distributed::TCPStoreOptions so;
    so.host = ctx.host;
    so.port = static_cast<uint16_t>(port);
    so.timeout = opts.store_timeout;
    ctx.store = std::make_shared<phi::distributed::TCPStore>(so);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] harness: cannot connect to the test's store: %s\n", rank,
                 e.what());
    ChildExit(kChildSetupFailed);
  }

  int code = 0;
  const int failures_before = FailureCount();
  try {
    fn(ctx);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] uncaught exception: %s\n", rank, e.what());
    code = kChildFailed;
  } catch (...) {
    std::fprintf(stderr, "[rank %d] uncaught exception of unknown type\n", rank);
    code = kChildFailed;
  }
  if (FailureCount() > failures_before) {
    std::fprintf(stderr, "[rank %d] gtest assertions failed in this rank\n", rank);
    code = kChildFailed;
  }
  ctx.store.reset();
  ChildExit(code);
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[64 * 1024];
  off_t off = 0;
  for (;;) {
    ssize_t n = pread(fd, buf, sizeof(buf), off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    off += n;
  }
  return out;
}

struct Child {
  int pid = -1;
  int port_fd = -1;  // write end of the port pipe
  int out_fd = -1;   // memfd holding the child's stdout+stderr
  bool done = false;
};

}  // namespace

std::string ChildResult::Describe() const {
  std::string s = "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + "): ";
  if (term_signal != 0) {
    s += "killed by signal " + std::to_string(term_signal) + " (" + strsignal(term_signal) + ")";
    if (timed_out) s += " by the harness after its timeout";
    else if (killed_by_harness) s += " by the harness after another rank failed";
  } else {
    s += "exit code " + std::to_string(exit_code);
    if (exit_code == kChildFailed) s += " (exception or failed assertion)";
    if (exit_code == kChildSetupFailed) s += " (harness setup failed)";
  }
  return s;
}

std::vector<ChildResult> SpawnRanks(int world_size,
                                    const std::function<void(const RankContext&)>& fn,
                                    const SpawnOptions& opts) {
  std::vector<ChildResult> results(static_cast<size_t>(std::max(world_size, 0)));
  std::vector<Child> children(results.size());
  FlushAll();  // or the children inherit, and later print, the parent's buffered output

  for (int r = 0; r < world_size; ++r) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      ADD_FAILURE() << "harness: pipe2 failed: " << std::strerror(errno);
      world_size = r;
      break;
    }
    std::string name = "rank" + std::to_string(r);
    int out = memfd_create(name.c_str(), MFD_CLOEXEC);
    pid_t pid = out >= 0 ? fork() : -1;
    if (pid == 0) {
      // The write ends held for earlier children must not keep their pipes open.
      for (int j = 0; j < r; ++j) close(children[j].port_fd);
      close(fds[1]);
      dup2(out, STDOUT_FILENO);
      dup2(out, STDERR_FILENO);
      close(out);
      RunChild(r, world_size, fds[0], fn, opts);
    }
    close(fds[0]);
    if (pid < 0) {
      ADD_FAILURE() << "harness: cannot start rank " << r << ": " << std::strerror(errno);
      close(fds[1]);
      if (out >= 0) close(out);
      world_size = r;
      break;
    }
    children[r].pid = pid;
    children[r].port_fd = fds[1];
    children[r].out_fd = out;
    results[r].rank = r;
    results[r].pid = pid;
  }
  results.resize(static_cast<size_t>(world_size));
  children.resize(static_cast<size_t>(world_size));

  // Only now, with every child forked, does this process get a server thread.
  phi::distributed::TCPStoreServer server;
  try {
    server.Start("127.0.0.1", 0);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "harness: cannot start the store server: " << e.what();
  }
  std::string port_line = std::to_string(server.running() ? server.port() : 0) + "\n";
  for (auto& c : children) {
    if (server.running()) {
      ssize_t n = write(c.port_fd, port_line.data(), port_line.size());
      (void)n;  // a child that died already shows up in its exit status
    }
    close(c.port_fd);
  }

  const auto deadline = Clock::now() + opts.timeout;
  size_t remaining = children.size();
  bool any_failed = false;
  while (remaining > 0) {
    for (size_t i = 0; i < children.size(); ++i) {
      if (children[i].done) continue;
      int status = 0;
      pid_t w = waitpid(children[i].pid, &status, WNOHANG);
      if (w == 0) continue;
      children[i].done = true;
      --remaining;
      if (w < 0) {
        results[i].exit_code = -1;
        any_failed = true;
        continue;
      }
      if (WIFEXITED(status)) results[i].exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) results[i].term_signal = WTERMSIG(status);
      if (!results[i].ok()) any_failed = true;
    }
    if (remaining == 0) break;
    const bool timed_out = Clock::now() >= deadline;
    if (timed_out || (opts.kill_all_on_failure && any_failed)) {
      for (size_t i = 0; i < children.size(); ++i) {
        if (children[i].done) continue;
        kill(children[i].pid, SIGKILL);
        results[i].killed_by_harness = true;
        results[i].timed_out = timed_out;
        int status = 0;
        waitpid(children[i].pid, &status, 0);
        if (WIFEXITED(status)) results[i].exit_code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) results[i].term_signal = WTERMSIG(status);
        children[i].done = true;
        --remaining;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  server.Stop();
  for (size_t i = 0; i < children.size(); ++i) {
    results[i].output = ReadAll(children[i].out_fd);
    close(children[i].out_fd);
  }
  return results;
}

void RunRanks(int world_size, const std::function<void(const RankContext&)>& fn,
              const SpawnOptions& opts) {
  for (const ChildResult& r : SpawnRanks(world_size, fn, opts)) {
    if (r.ok()) continue;
    ADD_FAILURE() << r.Describe() << "\n----- output of rank " << r.rank << " -----\n"
                  << r.output << "\n----- end of rank " << r.rank << " output -----";
  }
}

}  // namespace testing
}  // namespace paddle_like
