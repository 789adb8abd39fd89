#include "tools/launch/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "phi/core/distributed/store/rendezvous.h"
#include "phi/core/distributed/store/store_auth.h"
#include "distributed/watchdog.h"
#include "phi/core/distributed/liveness.h"
#include "phi/core/distributed/store/tcp_store.h"
#include "phi/core/distributed/store/tcp_store_server.h"
#include "tools/common/fr_analysis.h"
#include "tools/launch/output_relay.h"

extern char** environ;

namespace paddle_like {
namespace launch {
namespace {

using Clock = std::chrono::steady_clock;

// ------------------------------------------------------------------ signals: a self-pipe
int g_signal_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  int saved = errno;
  unsigned char b = static_cast<unsigned char>(sig);
  ssize_t ignored = ::write(g_signal_pipe[1], &b, 1);
  (void)ignored;
  errno = saved;
}

void InstallSignalHandlers() {
  if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    std::perror("launch: pipe2");
    std::exit(1);
  }
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaction(s, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

std::string SignalName(int sig) {
  static const std::map<int, const char*> names = {
      {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
      {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"},
      {SIGSEGV, "SIGSEGV"}, {SIGPIPE, "SIGPIPE"}, {SIGTERM, "SIGTERM"}, {SIGUSR1, "SIGUSR1"},
      {SIGUSR2, "SIGUSR2"}, {SIGSTOP, "SIGSTOP"}, {SIGTSTP, "SIGTSTP"}, {SIGCONT, "SIGCONT"}};
  auto it = names.find(sig);
  return it != names.end() ? it->second : "signal " + std::to_string(sig);
}

// "exited with code 3" / "was killed by signal 11 (SIGSEGV)".
std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int s = WTERMSIG(status);
    return "was killed by signal " + std::to_string(s) + " (" + SignalName(s) + ")";
  }
  return "ended with status " + std::to_string(status);
}

int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

void Say(const std::string& msg) { WriteAll(2, "launch: " + msg + "\n"); }

// ------------------------------------------------------------------ one rank
struct Rank {
  int rank = 0;
  int local_rank = 0;
  pid_t pid = -1;
  bool pgroup = false;  // pid leads its own process group
  bool running = false;
  int status = 0;
  bool died = false;  // --elastic: killed by a signal, the others went on
  bool stopped = false;  // stopped by a signal (SIGSTOP, SIGTSTP): silent, sockets still open
  int log_fd = -1;
  std::unique_ptr<OutputRelay> out, err;

  void Signal(int sig) const {
    if (pid <= 0) return;
    if (!(pgroup && ::kill(-pid, sig) == 0) && running) ::kill(pid, sig);
    // A stopped rank acts on SIGTERM only once it runs again.
    if (stopped && sig != SIGKILL && sig != SIGCONT) Signal(SIGCONT);
  }
};

// The environment every rank gets: ours without the variables the launcher owns, then those.
std::vector<std::string> RankEnvironment(const LaunchOptions& o, int rank, int local_rank,
                                         const std::string& master_addr, int master_port) {
  std::map<std::string, std::string> set = {
      {"RANK", std::to_string(rank)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"WORLD_SIZE", std::to_string(o.world_size())},
      {"LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node)},
      {"GROUP_RANK", std::to_string(o.node_rank)},
      {"MASTER_ADDR", master_addr},
      {"MASTER_PORT", std::to_string(master_port)},
      {"PADDLE_TRAINER_ID", std::to_string(rank)},
      {"PADDLE_TRAINERS_NUM", std::to_string(o.world_size())},
      {"PADDLE_RANK_IN_NODE", std::to_string(local_rank)},
      {"PADDLE_LOCAL_SIZE", std::to_string(o.nproc_per_node)},
      {"PADDLE_NNODES", std::to_string(o.nnodes)},
      {"PADDLE_MASTER", (master_addr.find(':') != std::string::npos
                             ? "[" + master_addr + "]"
                             : master_addr) + ":" + std::to_string(master_port)},
  };
  // The launcher on node 0 runs the store server: rank 0 must not start another.
  if (!o.no_store) set[phi::distributed::kStoreHostedEnv] = "1";
  // No dead marks at all: the ranks find a death by its heartbeat deadline alone, as they
  // would a rank on a lost node (whose connections never close).
  if (o.no_dead_mark) set["FLAGS_liveness_dead_on_close"] = "0";
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    if (set.count(key) == 0) env.push_back(kv);
  }
  for (const auto& kv : set) env.push_back(kv.first + "=" + kv.second);
  if (std::getenv("PYTHONUNBUFFERED") == nullptr) env.push_back("PYTHONUNBUFFERED=1");
  return env;
}

bool MakeDirs(const std::string& path) {
  std::string cur;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    cur = path.substr(0, pos);
    if (cur.empty()) continue;
    if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Forks and execs one rank. Between fork and exec only async-signal-safe calls: everything
// the child needs is prepared here.
bool Spawn(Rank* r, const std::vector<std::string>& argv_s, const std::vector<std::string>& env_s,
           pid_t launcher_pid) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return false;
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    return false;
  }
  std::vector<char*> argv, envp;
  for (const auto& a : argv_s) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env_s) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  std::string exec_fail = "launch: cannot execute '" + argv_s[0] + "': ";

  // Signals stay blocked across fork until the child has dropped the launcher's handlers
  // (which write to the launcher's self-pipe).
  sigset_t all, old;
  sigfillset(&all);
  ::sigprocmask(SIG_BLOCK, &all, &old);
  pid_t pid = ::fork();
  if (pid != 0) ::sigprocmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) {
    for (int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
    return false;
  }
  if (pid == 0) {
    ::setpgid(0, 0);  // its own group: a terminal's Ctrl-C reaches the launcher only
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the launcher killed with SIGKILL leaves no rank
    if (::getppid() != launcher_pid) ::_exit(126);
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE}) ::sigaction(s, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::execvpe(argv[0], argv.data(), envp.data());
    int e = errno;
    ssize_t ignored = ::write(2, exec_fail.data(), exec_fail.size());
    const char* why = std::strerror(e);
    ignored = ::write(2, why, std::strlen(why));
    ignored = ::write(2, "\n", 1);
    (void)ignored;
    ::_exit(127);
  }
  // Also from the parent, so the group exists before we might signal it.
  r->pgroup = ::setpgid(pid, pid) == 0 || errno == EACCES;
  r->pid = pid;
  r->running = true;
  ::close(out[1]);
  ::close(err[1]);
  for (int fd : {out[0], err[0]}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  std::string prefix = "[rank " + std::to_string(r->rank) + "] ";
  r->out = std::make_unique<OutputRelay>(out[0], 1, r->log_fd, prefix);
  r->err = std::make_unique<OutputRelay>(err[0], 2, r->log_fd, prefix);
  return true;
}

int MsUntil(Clock::time_point t) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
  return ms < 0 ? 0 : static_cast<int>(ms) + 1;
}

}  // namespace

// Tells the other ranks at once that `rank` ended and how (the liveness service's dead mark,
// phi/core/distributed/liveness.h; the store also marks it when its connection closes, but
// cannot say how it ended). --no_dead_mark: no marks at all, the heartbeat deadline decides.
void MarkDead(const LaunchOptions& o, int port, int rank, const std::string& how) {
  if (o.no_store || o.no_dead_mark) return;  // no store of ours, or left to the heartbeat
  try {
    phi::distributed::TCPStore store(o.master_addr.empty() ? "127.0.0.1" : o.master_addr,
                                     static_cast<uint16_t>(port), /*is_master=*/false,
                                     /*world_size=*/0, std::chrono::seconds(5));
    phi::distributed::MarkRankDead(store, rank, "the launcher says it " + how);
  } catch (const std::exception& e) {
    Say(std::string("cannot mark the rank dead in the store: ") + e.what());
  }
}

namespace {

// A single-node job gets a fresh shared secret for its store unless one is set; a multi-node
// job uses PADDLE_STORE_TOKEN as given (the same on every node).
void EnsureStoreToken(const LaunchOptions& o) {
  if (o.nnodes != 1 || !phi::distributed::StoreTokenFromEnv().empty()) return;
  static const char* hex = "0123456789abcdef";
  std::string token;
  for (uint8_t b : phi::distributed::RandomBytes(16)) {
    token += hex[b >> 4];
    token += hex[b & 15];
  }
  ::setenv(phi::distributed::kStoreTokenEnv, token.c_str(), 1);
}

// --no_store without a port: a free port for rank 0's own store, bound and released here
// (rank 0 binds it again moments later). Taken below the kernel's usual ephemeral range
// (32768+), so that no outgoing connection is handed it meanwhile; the kernel's choice if none
// is free. 0 when there is none at all.
int PickFreePort(const LaunchOptions& o) {
  uint64_t pick = 0;
  for (uint8_t b : phi::distributed::RandomBytes(8)) pick = (pick << 8) | b;
  for (int attempt = 0; attempt < 64; ++attempt) {
    pick = pick * 6364136223846793005ULL + 1442695040888963407ULL;
    const int candidate = 20000 + static_cast<int>((pick >> 33) % 12000);
    try {
      phi::distributed::TCPStoreServer probe;
      probe.Start(o.master_addr, static_cast<uint16_t>(candidate));
      return probe.port();
    } catch (const std::exception&) {
    }
  }
  phi::distributed::TCPStoreServer probe;
  try {
    probe.Start(o.master_addr, 0);
  } catch (const std::exception& e) {
    Say(std::string("cannot find a free port: ") + e.what());
    return 0;
  }
  return probe.port();
}

// Where the ranks' comm watchdogs dump their flight recorders on a timeout (FLAGS_comm_dump_dir
// unless set); after the job the launcher compares the dumps when a rank ended by its watchdog.
std::string SetDumpDir(const LaunchOptions& o) {
  if (const char* set = std::getenv("FLAGS_comm_dump_dir"); !set || !*set) {
    std::string dir = o.log_dir.empty() ? "/tmp/paddle_like_fr_" + std::to_string(::getpid())
                                        : o.log_dir + "/flight_recorder";
    ::setenv("FLAGS_comm_dump_dir", dir.c_str(), 1);
  }
  return std::getenv("FLAGS_comm_dump_dir");
}

// One run of the job on this node: the ranks, and what the launcher has done to them.
class Job {
 public:
  explicit Job(const LaunchOptions& o)
      : o_(o),
        ranks_(static_cast<size_t>(o.nproc_per_node)),
        grace_(std::chrono::milliseconds(static_cast<int64_t>(o.grace_s * 1000))) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", o.grace_s);
    grace_text_ = buf;
  }

  // The store (hosted here on node 0, a port picked for rank 0 with --no_store, or reached).
  bool StartStore();
  // Forks every rank; a rank that cannot start stops the others.
  void SpawnRanks();
  // Reaps, relays output and forwards signals until every rank has ended.
  void Supervise();
  // Kills what the ranks left behind, closes the relays, stops the store.
  void CleanUp();
  // Names the watchdog's findings when a rank was ended by it.
  void ReportWatchdogEnds(const std::string& dump_dir) const;
  // The job's exit status.
  int ExitStatus() const;

 private:
  void StopAll(int sig);
  int Reap();                   // returns how many ranks are still running
  void KillAfterGrace(int alive);
  void OnSignals();             // the self-pipe is readable

  const LaunchOptions& o_;
  std::unique_ptr<phi::distributed::TCPStoreServer> server_;
  int port_ = 0;
  std::vector<Rank> ranks_;
  bool stopping_ = false;  // the ranks have been told to stop
  bool killed_ = false;    // SIGKILL sent
  int stop_signal_ = 0;    // the signal that stopped the launcher
  int first_failed_ = -1;  // index into ranks_
  Clock::time_point kill_at_{};
  std::chrono::milliseconds grace_;
  std::string grace_text_;
};

bool Job::StartStore() {
  port_ = o_.master_port;
  if (o_.no_store && port_ == 0) {
    port_ = PickFreePort(o_);
    if (port_ == 0) return false;
  } else if (o_.node_rank == 0 && !o_.no_store) {
    server_ = std::make_unique<phi::distributed::TCPStoreServer>();
    try {
      server_->Start(o_.master_addr, static_cast<uint16_t>(o_.master_port));
    } catch (const std::exception& e) {
      Say(std::string("cannot host the store: ") + e.what());
      return false;
    }
    port_ = server_->port();
  }
  if (!o_.quiet) {
    Say(std::to_string(o_.nproc_per_node) + " rank(s) on node " + std::to_string(o_.node_rank) +
        " of " + std::to_string(o_.nnodes) + ", world size " + std::to_string(o_.world_size()) +
        ", store " + (server_ ? "hosted" : o_.no_store ? "left to rank 0" : "reached") + " at " +
        o_.master_addr + ":" + std::to_string(port_));
  }
  return true;
}

void Job::StopAll(int sig) {
  stopping_ = true;
  kill_at_ = Clock::now() + grace_;
  for (auto& r : ranks_) {
    if (r.running) r.Signal(sig);
  }
}

void Job::SpawnRanks() {
  const pid_t self = ::getpid();
  for (int i = 0; i < o_.nproc_per_node; ++i) {
    Rank& r = ranks_[static_cast<size_t>(i)];
    r.local_rank = i;
    r.rank = o_.node_rank * o_.nproc_per_node + i;
    if (!o_.log_dir.empty()) {
      std::string path = o_.log_dir + "/rank_" + std::to_string(r.rank) + ".log";
      r.log_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (r.log_fd < 0) Say("cannot open " + path + ": " + std::strerror(errno));
    }
    auto env = RankEnvironment(o_, r.rank, r.local_rank, o_.master_addr, port_);
    if (!Spawn(&r, o_.command, env, self)) {
      Say("cannot start rank " + std::to_string(r.rank) + ": " + std::strerror(errno));
      first_failed_ = i;
      StopAll(SIGTERM);
      return;
    }
  }
}

int Job::Reap() {
  int alive = 0;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    Rank& r = ranks_[i];
    if (!r.running) continue;
    int st = 0;
    // WUNTRACED/WCONTINUED: a stopped rank keeps its sockets open and its peers only see
    // silence until their timeout; the launcher, which sees the stop, names it at once.
    pid_t w = ::waitpid(r.pid, &st, WNOHANG | WUNTRACED | WCONTINUED);
    if (w == r.pid && (WIFSTOPPED(st) || WIFCONTINUED(st))) {
      r.stopped = WIFSTOPPED(st);
      Say("rank " + std::to_string(r.rank) +
          (r.stopped ? " was stopped by " + SignalName(WSTOPSIG(st)) +
                           "; its peers will time out waiting for it"
                     : " was continued"));
      ++alive;
    } else if (w == r.pid) {
      r.running = false;
      r.status = st;
      // What it wrote before it ended comes before the launcher's word on it.
      for (OutputRelay* rl : {r.out.get(), r.err.get()}) {
        if (rl && rl->open()) rl->OnReadable();
      }
      bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
      if (!ok && !stopping_ && o_.elastic && WIFSIGNALED(st)) {
        r.died = true;
        Say("rank " + std::to_string(r.rank) + " " + DescribeStatus(st) +
            "; elastic: the other ranks go on without it");
        MarkDead(o_, port_, r.rank, DescribeStatus(st));
      } else if (!ok && !stopping_) {
        first_failed_ = static_cast<int>(i);
        MarkDead(o_, port_, r.rank, DescribeStatus(st));
        Say("rank " + std::to_string(r.rank) + " " + DescribeStatus(st) +
            (ranks_.size() > 1 ? "; stopping the other ranks" : ""));
        StopAll(SIGTERM);
      }
    } else {
      ++alive;
    }
  }
  return alive;
}

void Job::KillAfterGrace(int alive) {
  if (!stopping_ || killed_ || alive == 0 || Clock::now() < kill_at_) return;
  for (auto& r : ranks_) {
    if (r.running) {
      Say("rank " + std::to_string(r.rank) + " still running " + grace_text_ +
          " s after SIGTERM; sending SIGKILL");
    }
  }
  for (auto& r : ranks_) r.Signal(SIGKILL);
  killed_ = true;
}

void Job::OnSignals() {
  unsigned char sigs[64];
  ssize_t got;
  while ((got = ::read(g_signal_pipe[0], sigs, sizeof(sigs))) > 0) {
    for (ssize_t k = 0; k < got; ++k) {
      int sig = sigs[k];
      if (sig == SIGCHLD) continue;  // reaped at the top of the loop
      if (!stopping_) {
        stop_signal_ = sig;
        Say("received " + SignalName(sig) + "; forwarding it to every rank");
        StopAll(sig);
      } else if (!killed_) {
        Say("received " + SignalName(sig) + " again; sending SIGKILL to every rank");
        for (auto& r : ranks_) r.Signal(SIGKILL);
        killed_ = true;
      }
    }
  }
}

void Job::Supervise() {
  std::optional<Clock::time_point> drain_until;
  for (;;) {
    const int alive = Reap();
    KillAfterGrace(alive);
    std::vector<pollfd> fds;
    std::vector<OutputRelay*> relays;
    fds.push_back({g_signal_pipe[0], POLLIN, 0});
    for (auto& r : ranks_) {
      for (OutputRelay* rl : {r.out.get(), r.err.get()}) {
        if (rl && rl->open()) {
          fds.push_back({rl->fd(), POLLIN, 0});
          relays.push_back(rl);
        }
      }
    }
    if (alive == 0) {
      // Every rank is gone; output still in the pipes is drained, but a descendant that
      // keeps a pipe open cannot hold the launcher for long.
      if (relays.empty()) return;
      if (!drain_until) drain_until = Clock::now() + std::chrono::seconds(1);
      if (Clock::now() >= *drain_until) return;
    }
    int timeout = -1;
    if (stopping_ && !killed_ && alive > 0) timeout = MsUntil(kill_at_);
    if (drain_until) timeout = MsUntil(*drain_until);
    int n = ::poll(fds.data(), fds.size(), timeout);
    if (n < 0 && errno != EINTR) {
      std::perror("launch: poll");
      return;
    }
    if (n <= 0) continue;
    if (fds[0].revents & POLLIN) OnSignals();
    for (size_t k = 1; k < fds.size(); ++k) {
      if (fds[k].revents & (POLLIN | POLLHUP | POLLERR)) relays[k - 1]->OnReadable();
    }
  }
}

void Job::CleanUp() {
  // A rank's own descendants (a shell's children) go too when the job failed or was stopped.
  if (stopping_) {
    for (auto& r : ranks_) {
      if (r.pgroup && r.pid > 0) ::kill(-r.pid, SIGKILL);
    }
  }
  for (auto& r : ranks_) {
    r.out.reset();
    r.err.reset();
    if (r.log_fd >= 0) ::close(r.log_fd);
  }
  if (server_) server_->Stop();
}

void Job::ReportWatchdogEnds(const std::string& dump_dir) const {
  for (const auto& r : ranks_) {
    if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == distributed::kWatchdogExitCode) {
      try {
        Say("rank " + std::to_string(r.rank) + " was ended by its comm watchdog; the flight "
            "recorders in " + dump_dir + " say:\n" + tools::AnalyzeFlightRecorderDumps(dump_dir));
      } catch (const std::exception& e) {
        Say(std::string("a rank was ended by its comm watchdog; no analysis: ") + e.what());
      }
      return;
    }
  }
}

int Job::ExitStatus() const {
  if (first_failed_ >= 0) {
    const Rank& r = ranks_[static_cast<size_t>(first_failed_)];
    if (r.pid <= 0) return 1;
    Say("job failed: rank " + std::to_string(r.rank) + " " + DescribeStatus(r.status));
    return ExitCodeOf(r.status) != 0 ? ExitCodeOf(r.status) : 1;
  }
  if (stop_signal_ != 0) {
    Say("job stopped by " + SignalName(stop_signal_));
    return 128 + stop_signal_;
  }
  int finished = 0;
  for (const auto& r : ranks_) {
    if (r.died) continue;  // --elastic: reported when it happened
    if (!(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0)) return ExitCodeOf(r.status);
    ++finished;
  }
  if (finished == 0) {
    Say("job failed: every rank died");
    return 1;
  }
  if (finished < static_cast<int>(ranks_.size()) && !o_.quiet) {
    Say("elastic: " + std::to_string(finished) + " of " + std::to_string(ranks_.size()) +
        " rank(s) finished");
  }
  return 0;
}

}  // namespace

int RunJob(const LaunchOptions& o) {
  InstallSignalHandlers();
  EnsureStoreToken(o);
  Job job(o);
  if (!job.StartStore()) return 1;
  const std::string dump_dir = SetDumpDir(o);
  if (!o.log_dir.empty() && !MakeDirs(o.log_dir)) {
    Say("cannot create --log_dir '" + o.log_dir + "': " + std::strerror(errno));
    return 1;
  }
  job.SpawnRanks();
  job.Supervise();
  job.CleanUp();
  job.ReportWatchdogEnds(dump_dir);
  return job.ExitStatus();
}

}  // namespace launch
}  // namespace paddle_like
