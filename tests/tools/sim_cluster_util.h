// A simulated cluster for the multi-node tests: tools/sim_cluster.sh's nodes (network
// namespaces behind a switch namespace), up in the constructor and removed in the
// destructor, so a failing test cleans up too. Where clusters cannot be made (not root, no
// `ip`, no namespaces), skip_reason() says why and the test skips.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/tools/tools_test_util.h"

namespace paddle_like {
namespace testing {

class SimCluster {
 public:
  // `rate`: a per-node link cap in tc syntax ("1gbit"); empty for none.
  explicit SimCluster(int nodes, const std::string& rate = "");
  ~SimCluster();
  SimCluster(const SimCluster&) = delete;
  SimCluster& operator=(const SimCluster&) = delete;

  const std::string& skip_reason() const { return skip_reason_; }
  std::string addr(int node) const { return "10.77.0." + std::to_string(node + 1); }
  // Starts `argv` inside `node` with `env` added to this process's environment.
  std::unique_ptr<Proc> Start(int node, const std::vector<std::string>& argv,
                              const std::map<std::string, std::string>& env = {}) const;
  // Bytes the node has received on its link so far (-1 when it cannot be read).
  long long RxBytes(int node) const;
  // Takes the node's link down (a partition: silence, no FIN/RST/ICMP) or up again.
  void Link(int node, bool up) const;

 private:
  std::string name_;
  std::string skip_reason_;
  bool up_ = false;
};

#define REQUIRE_SIM_CLUSTER(cluster) \
  if (!(cluster).skip_reason().empty()) GTEST_SKIP() << (cluster).skip_reason()

}  // namespace testing
}  // namespace paddle_like
