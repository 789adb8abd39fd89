#include "distributed/comm_trace.h"

#include <glog/logging.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include "distributed/op_observer.h"
#include "distributed/stream_task.h"
#include "phi/core/flags.h"

namespace paddle_like {
namespace distributed {

namespace {

using Clock = std::chrono::steady_clock;

// A JSON string literal.
std::string Json(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
      continue;
    }
    out += c;
  }
  return out + "\"";
}

class Tracer {
 public:
  static Tracer& Get() {
    static auto* t = new Tracer();  // leaked: written at exit, after static destructors
    return *t;
  }

  void AddTask(std::shared_ptr<TaskState> state, int gid, int rank, int64_t bytes) {
    std::lock_guard<std::mutex> lk(mu_);
    if (!Room()) return;
    tasks_.push_back({std::move(state), gid, rank, bytes});
  }

  void AddSpan(const char* name, Clock::time_point start, Clock::time_point end) {
    std::lock_guard<std::mutex> lk(mu_);
    if (!Room()) return;
    spans_.push_back({name, start, end});
  }

  std::string Write() {
    std::lock_guard<std::mutex> lk(mu_);
    const std::string dir = FLAGS_comm_trace_dir;
    if (dir.empty()) return "";
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      LOG(WARNING) << "comm trace: cannot create " << dir << ": " << std::strerror(errno);
      return "";
    }
    const char* rank_env = std::getenv("RANK");
    const int pid = rank_env ? std::atoi(rank_env) : static_cast<int>(::getpid());
    const std::string path = dir + "/trace_" + std::to_string(::getpid()) + ".json";
    std::ofstream f(path);
    f << "{\"traceEvents\": [\n";
    f << "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " << pid
      << ", \"args\": {\"name\": \"rank " << pid << "\"}}";
    for (const auto& s : spans_) {
      f << ",\n{\"ph\": \"X\", \"name\": " << Json(s.name) << ", \"cat\": \"compute\", \"pid\": "
        << pid << ", \"tid\": \"compute\", \"ts\": " << Us(s.start)
        << ", \"dur\": " << Dur(s.start, s.end) << "}";
    }
    int64_t written = 0;
    for (const auto& t : tasks_) {
      const OpDesc& desc = t.state->desc;
      int64_t started = t.state->started_us.load(), finished = t.state->finished_us.load();
      std::string name = std::string(CommTypeToString(desc.type)) +
                         (desc.name.empty() ? "" : " " + desc.name);
      std::ostringstream args;
      args << "{\"seq\": " << desc.seq << ", \"p2p_seq\": " << desc.p2p_seq
           << ", \"group\": " << t.gid << ", \"rank\": " << t.rank
           << ", \"bytes\": " << t.bytes << ", \"dtype\": \""
           << phi::DataTypeToString(desc.dtype) << "\", \"state\": \""
           << TaskStatusName(t.state->status.load()) << "\"}";
      // The issue, on the thread that called the op.
      f << ",\n{\"ph\": \"i\", \"s\": \"t\", \"name\": " << Json("issue " + name)
        << ", \"cat\": \"issue\", \"pid\": " << pid << ", \"tid\": \"calc (issue)\", \"ts\": "
        << Us(t.state->issued_at) << ", \"args\": " << args.str() << "}";
      if (started > 0 && finished > 0) {  // ran on the comm stream
        f << ",\n{\"ph\": \"X\", \"name\": " << Json(name) << ", \"cat\": \"comm\", \"pid\": " << pid
          << ", \"tid\": \"comm g" << t.gid << "\", \"ts\": " << Us(t.state->issued_at) + started
          << ", \"dur\": " << std::max<int64_t>(1, finished - started) << ", \"args\": " << args.str()
          << "}";
      }
      ++written;
    }
    f << "\n]}\n";
    if (!f) {
      LOG(WARNING) << "comm trace: cannot write " << path;
      return "";
    }
    LOG(INFO) << "comm trace: " << written << " comm task(s) and " << spans_.size()
              << " compute span(s) written to " << path;
    return path;
  }

 private:
  Tracer() : steady0_(Clock::now()), wall0_us_(WallUs()) {
    std::atexit([] { Tracer::Get().Write(); });
  }
  static int64_t WallUs() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  // Wall-clock microseconds (so ranks' files share a time base), from the steady clock.
  int64_t Us(Clock::time_point t) const {
    return wall0_us_ + std::chrono::duration_cast<std::chrono::microseconds>(t - steady0_).count();
  }
  static int64_t Dur(Clock::time_point a, Clock::time_point b) {
    return std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::microseconds>(b - a).count());
  }
  bool Room() {
    if (tasks_.size() + spans_.size() < static_cast<size_t>(FLAGS_comm_trace_max_events)) return true;
    if (!full_warned_) {
      LOG(WARNING) << "comm trace: FLAGS_comm_trace_max_events (" << FLAGS_comm_trace_max_events
                   << ") reached; later events are not recorded";
      full_warned_ = true;
    }
    return false;
  }

  struct Task {
    std::shared_ptr<TaskState> state;  // holds the op's desc
    int gid, rank;
    int64_t bytes;
  };
  struct Span {
    const char* name;
    Clock::time_point start, end;
  };
  std::mutex mu_;
  Clock::time_point steady0_;
  int64_t wall0_us_;
  std::vector<Task> tasks_;
  std::vector<Span> spans_;
  bool full_warned_ = false;
};

}  // namespace

bool CommTraceEnabled() { return !FLAGS_comm_trace_dir.empty(); }

namespace {
class CommTraceObserver : public OpObserver {
 public:
  CommTraceObserver(int gid, int rank) : gid_(gid), rank_(rank) {}
  void OnIssue(const std::shared_ptr<TaskState>& state) override {
    // The state decided at its issue whether the op is traced: a traced op is one with
    // precise times (stream_task.h), and only those are kept.
    if (!state->precise_times) return;
    const OpDesc& desc = state->desc;
    Tracer::Get().AddTask(state, gid_, rank_,
                          desc.numel_in * static_cast<int64_t>(phi::SizeOf(desc.dtype)));
  }

 private:
  const int gid_, rank_;
};
}  // namespace

std::shared_ptr<OpObserver> MakeCommTraceObserver(int gid, int rank) {
  return std::make_shared<CommTraceObserver>(gid, rank);
}

std::string FlushCommTrace() { return CommTraceEnabled() ? Tracer::Get().Write() : ""; }

TraceSpan::TraceSpan(const char* name)
    : name_(name), on_(CommTraceEnabled()), start_(on_ ? Clock::now() : Clock::time_point()) {}

TraceSpan::~TraceSpan() {
  if (on_) Tracer::Get().AddSpan(name_, start_, Clock::now());
}

}  // namespace distributed
}  // namespace paddle_like
