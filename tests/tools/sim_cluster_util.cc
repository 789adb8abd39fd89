#include "tests/tools/sim_cluster_util.h"

#include <unistd.h>

#include <cstdio>
#include <random>
#include <stdexcept>

namespace paddle_like {
namespace testing {
namespace {

#ifdef SIM_CLUSTER_SH
const std::string kScript = SIM_CLUSTER_SH;
#else
const std::string kScript;
#endif

ProcResult Script(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/bin/bash", kScript};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProc(argv, std::chrono::seconds(30));
}

// A name unique to this process and run: [a-z0-9], at most 12 characters.
std::string UniqueName() {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "t%d%04x", static_cast<int>(::getpid() % 1000000),
                static_cast<unsigned>(std::random_device{}() & 0xffff));
  return buf;
}

}  // namespace

SimCluster::SimCluster(int nodes, const std::string& rate) : name_(UniqueName()) {
  if (kScript.empty()) {
    skip_reason_ = "tools/sim_cluster.sh was not configured (SIM_CLUSTER_SH)";
    return;
  }
  auto check = Script({"check"});
  if (check.exit_code() != 0) {
    skip_reason_ = "cannot simulate nodes here: " + check.output;
    return;
  }
  Script({"cleanup"});  // the leftovers of runs that crashed (their creators are gone)
  std::vector<std::string> args = {"up", name_, std::to_string(nodes)};
  if (!rate.empty()) args.insert(args.end(), {"--rate", rate});
  auto r = Script(args);
  up_ = true;  // whatever was made is removed by the destructor
  if (r.exit_code() != 0) skip_reason_ = "cannot create the simulated nodes: " + r.output;
}

SimCluster::~SimCluster() {
  if (up_) Script({"down", name_});
}

std::unique_ptr<Proc> SimCluster::Start(int node, const std::vector<std::string>& argv,
                                        const std::map<std::string, std::string>& env) const {
  std::vector<std::string> full = {"/bin/bash", kScript, "exec", name_, std::to_string(node)};
  full.insert(full.end(), argv.begin(), argv.end());
  return std::make_unique<Proc>(full, env);
}

long long SimCluster::RxBytes(int node) const {
  // `ip netns exec` mounts the node's own /sys, so this is the node's eth0.
  auto r = Script({"exec", name_, std::to_string(node), "cat",
                   "/sys/class/net/eth0/statistics/rx_bytes"});
  if (r.exit_code() != 0) return -1;
  try {
    return std::stoll(r.output);
  } catch (const std::exception&) {
    return -1;
  }
}

void SimCluster::Link(int node, bool up) const {
  auto r = Script({"link", name_, std::to_string(node), up ? "up" : "down"});
  if (r.exit_code() != 0) throw std::runtime_error("sim_cluster link failed: " + r.output);
}

}  // namespace testing
}  // namespace paddle_like
