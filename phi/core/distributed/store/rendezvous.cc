#include "phi/core/distributed/store/rendezvous.h"

#include <glog/logging.h>

#include <cerrno>
#include <cstdlib>
#include <map>
#include <vector>

#include "phi/core/distributed/store/file_store.h"
#include "phi/core/distributed/store/tcp_store.h"
#include "phi/core/distributed/store/tcp_utils.h"
#include "phi/core/errors.h"

namespace phi {
namespace distributed {
namespace {

// Every problem found, reported together so a user fixes a launch script once.
class Problems {
 public:
  void Add(const std::string& p) { list_.push_back(p); }
  bool empty() const { return list_.empty(); }
  std::string Join() const {
    std::string s;
    for (const auto& p : list_) s += "\n  - " + p;
    return s;
  }

 private:
  std::vector<std::string> list_;
};

bool ParseInt(const std::string& s, long long* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end != s.c_str() + s.size()) return false;
  *out = v;
  return true;
}

// One named value coming from several sources ("RANK=1", "rank argument=1"); all that are
// present must parse and agree.
struct Sourced {
  std::string what;  // "rank"
  std::vector<std::pair<std::string, std::string>> given;  // (source, raw value)
  void Offer(const std::string& source, const std::optional<std::string>& v) {
    if (v) given.emplace_back(source, *v);
  }
  // Returns true when at least one source gave a value and all agree (as integers).
  bool ResolveInt(Problems* p, long long* out) const {
    bool have = false;
    long long first = 0;
    std::string first_src;
    for (const auto& g : given) {
      long long v;
      if (!ParseInt(g.second, &v)) {
        p->Add(what + ": " + g.first + "='" + g.second + "' is not an integer");
        return false;
      }
      if (!have) {
        have = true;
        first = v;
        first_src = g.first;
      } else if (v != first) {
        p->Add("contradictory " + what + ": " + first_src + "=" + std::to_string(first) +
               " but " + g.first + "=" + std::to_string(v));
        return false;
      }
    }
    *out = first;
    return have;
  }
};

std::map<std::string, std::string> ParseQuery(const std::string& q, Problems* p) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start <= q.size() && !q.empty()) {
    size_t amp = q.find('&', start);
    std::string item = q.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
    if (!item.empty()) {
      auto eq = item.find('=');
      if (eq == std::string::npos) {
        p->Add("query parameter '" + item + "' has no value");
      } else {
        out[item.substr(0, eq)] = item.substr(eq + 1);
      }
    }
    if (amp == std::string::npos) break;
    start = amp + 1;
  }
  return out;
}

// mpirun numbers the ranks but has no store: the store's address still comes from the
// environment (documented in docs/architecture.md, "MPI backend").
std::string UnderMpirunHint(const EnvLookup& env) {
  if (!env("OMPI_COMM_WORLD_RANK")) return "";
  return " (under mpirun, export them to every rank: mpirun -x MASTER_ADDR=<rank 0's host> "
         "-x MASTER_PORT=<a free port> ...)";
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

RendezvousSpec ParseInitMethod(const std::string& init_method, int rank, int world_size,
                               const EnvLookup& env) {
  Problems problems;
  RendezvousSpec spec;
  Sourced r{"rank", {}}, n{"world_size", {}}, lr{"local_rank", {}}, port{"master port", {}};
  Sourced addr{"master address", {}};
  if (rank >= 0) r.Offer("rank argument", std::to_string(rank));
  if (world_size >= 0) n.Offer("world_size argument", std::to_string(world_size));

  auto scheme_end = init_method.find("://");
  std::string scheme = scheme_end == std::string::npos ? "" : init_method.substr(0, scheme_end);
  std::string rest = scheme_end == std::string::npos ? "" : init_method.substr(scheme_end + 3);
  std::string query;
  if (auto qm = rest.find('?'); qm != std::string::npos) {
    query = rest.substr(qm + 1);
    rest = rest.substr(0, qm);
  }
  auto params = ParseQuery(query, &problems);
  auto take_param = [&](const char* name) -> std::optional<std::string> {
    auto it = params.find(name);
    if (it == params.end()) return std::nullopt;
    std::string v = it->second;
    params.erase(it);
    return v;
  };

  if (scheme == "env") {
    spec.kind = RendezvousSpec::Kind::kTcp;
    if (!rest.empty()) problems.Add("env:// takes no address, got 'env://" + rest + "'");
    r.Offer("RANK", env("RANK"));
    r.Offer("PADDLE_TRAINER_ID", env("PADDLE_TRAINER_ID"));
    n.Offer("WORLD_SIZE", env("WORLD_SIZE"));
    n.Offer("PADDLE_TRAINERS_NUM", env("PADDLE_TRAINERS_NUM"));
    lr.Offer("LOCAL_RANK", env("LOCAL_RANK"));
    lr.Offer("PADDLE_RANK_IN_NODE", env("PADDLE_RANK_IN_NODE"));
    // Under OpenMPI's mpirun: one more source, used only where nothing above names the value
    // (a launcher's RANK inside an mpirun job wins over mpirun's own numbering).
    if (r.given.empty()) r.Offer("OMPI_COMM_WORLD_RANK", env("OMPI_COMM_WORLD_RANK"));
    if (n.given.empty()) n.Offer("OMPI_COMM_WORLD_SIZE", env("OMPI_COMM_WORLD_SIZE"));
    if (lr.given.empty()) {
      lr.Offer("OMPI_COMM_WORLD_LOCAL_RANK", env("OMPI_COMM_WORLD_LOCAL_RANK"));
    }
    addr.Offer("MASTER_ADDR", env("MASTER_ADDR"));
    port.Offer("MASTER_PORT", env("MASTER_PORT"));
    if (auto pm = env("PADDLE_MASTER")) {
      std::string h, p;
      if (tcputils::SplitHostPort(*pm, &h, &p)) {
        addr.Offer("PADDLE_MASTER", h);
        port.Offer("PADDLE_MASTER", p);
      } else {
        problems.Add("PADDLE_MASTER='" + *pm + "' is not host:port");
      }
    }
  } else if (scheme == "tcp") {
    spec.kind = RendezvousSpec::Kind::kTcp;
    std::string h, p;
    if (tcputils::SplitHostPort(rest, &h, &p)) {
      addr.Offer("tcp:// address", h);
      port.Offer("tcp:// address", p);
    } else {
      problems.Add("tcp:// needs host:port, got '" + rest + "'");
    }
  } else if (scheme == "file") {
    spec.kind = RendezvousSpec::Kind::kFile;
    spec.path = rest;
    if (rest.empty() || rest[0] != '/') {
      problems.Add("file:// needs an absolute path (file:///tmp/x), got '" + rest + "'");
    }
  } else {
    PADDLE_THROW(errors::InvalidArgument(
        "init method '%s' is not supported: use env://, tcp://host:port or file:///path",
        init_method.c_str()));
  }
  if (scheme != "env") {
    r.Offer("rank= in the URL", take_param("rank"));
    n.Offer("world_size= in the URL", take_param("world_size"));
    lr.Offer("local_rank= in the URL", take_param("local_rank"));
    for (const auto& kv : params) problems.Add("unknown query parameter '" + kv.first + "'");
  }

  long long v = 0;
  const bool have_rank = r.ResolveInt(&problems, &v);
  if (have_rank) {
    spec.rank = static_cast<int>(v);
  } else if (r.given.empty()) {
    problems.Add(scheme == "env" ? "missing rank: set RANK (or PADDLE_TRAINER_ID)"
                                 : "missing rank: add ?rank=R or pass rank");
  }
  if (n.ResolveInt(&problems, &v)) {
    spec.world_size = static_cast<int>(v);
  } else if (n.given.empty()) {
    problems.Add(scheme == "env" ? "missing world size: set WORLD_SIZE (or PADDLE_TRAINERS_NUM)"
                                 : "missing world size: add &world_size=N or pass world_size");
  }
  if (lr.ResolveInt(&problems, &v)) {
    if (v < 0) problems.Add("local rank must be >= 0, got " + std::to_string(v));
    spec.local_rank = static_cast<int>(v);
  }
  if (spec.kind == RendezvousSpec::Kind::kTcp) {
    // Addresses are compared as text: two spellings of one host count as contradictory,
    // which is what a user who set both wants to hear about.
    for (size_t i = 0; i < addr.given.size(); ++i) {
      if (addr.given[i].second != addr.given[0].second) {
        problems.Add("contradictory master address: " + addr.given[0].first + "='" +
                     addr.given[0].second + "' but " + addr.given[i].first + "='" +
                     addr.given[i].second + "'");
        break;
      }
    }
    if (addr.given.empty()) {
      problems.Add("missing master address: set MASTER_ADDR (or PADDLE_MASTER=host:port)" +
                   UnderMpirunHint(env));
    } else {
      spec.master_addr = addr.given[0].second;
    }
    if (port.ResolveInt(&problems, &v)) {
      if (v < 1 || v > 65535) {
        problems.Add("master port " + std::to_string(v) + " is not in 1..65535");
      } else {
        spec.master_port = static_cast<uint16_t>(v);
      }
    } else if (port.given.empty()) {
      problems.Add("missing master port: set MASTER_PORT (or PADDLE_MASTER=host:port)" +
                   UnderMpirunHint(env));
    }
  }
  if (spec.world_size != -1 && spec.world_size < 1) {
    problems.Add("world size must be >= 1, got " + std::to_string(spec.world_size));
  }
  if (have_rank) {
    if (spec.rank < 0 || (spec.world_size >= 1 && spec.rank >= spec.world_size)) {
      problems.Add("rank " + std::to_string(spec.rank) + " is not in [0, world size " +
                   std::to_string(spec.world_size) + ")");
    }
  }
  if (!problems.empty()) {
    PADDLE_THROW(errors::InvalidArgument("rendezvous through '%s' cannot proceed:%s",
                                         init_method.c_str(), problems.Join().c_str()));
  }
  if (spec.local_rank < 0) spec.local_rank = spec.rank;
  auto hosted = env(kStoreHostedEnv);
  spec.host_server = spec.kind == RendezvousSpec::Kind::kTcp && spec.rank == 0 &&
                     !(hosted && *hosted == "1");
  return spec;
}

RendezvousResult Rendezvous(const std::string& init_method, int rank, int world_size,
                            std::chrono::milliseconds timeout) {
  RendezvousSpec spec = ParseInitMethod(init_method, rank, world_size, ProcessEnv());
  RendezvousResult out;
  out.rank = spec.rank;
  out.world_size = spec.world_size;
  out.local_rank = spec.local_rank;
  if (spec.kind == RendezvousSpec::Kind::kFile) {
    out.store = std::make_shared<FileStore>(spec.path, timeout);
  } else {
    out.store = std::make_shared<TCPStore>(spec.master_addr, spec.master_port, spec.host_server,
                                           spec.world_size, timeout);
  }
  VLOG(1) << "rendezvous '" << init_method << "': rank " << out.rank << " of " << out.world_size
          << (spec.host_server ? " (hosting the store server)" : "");
  return out;
}

}  // namespace distributed
}  // namespace phi
