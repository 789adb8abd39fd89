// A group's backend-specific options: the seed's (and c10d's) `pg_options`, given to
// new_group / split_group / shrink_group and handed to the backend that serves the group.
// Each options type names its backend; a group applies it to that backend only, and a group
// that has no such backend refuses it (InvalidArgument naming both). What a field does not
// set stays the group's (timeout) or the flags' and environment's (interface, NCCL config).
#pragma once

#include <chrono>
#include <string>

#include "distributed/process_group.h"

namespace paddle_like {
namespace distributed {

class ProcessGroupOptions {
 public:
  virtual ~ProcessGroupOptions() = default;
  // The backend these options are for ("gloo", "nccl"), lower case.
  virtual std::string backend() const = 0;
  // This backend's timeout (unset: the group's).
  std::chrono::milliseconds timeout = ProcessGroup::kUnsetTimeout;
};

class ProcessGroupGlooOptions final : public ProcessGroupOptions {
 public:
  std::string backend() const override { return "gloo"; }
  // Where the group's Gloo pairs listen: a network interface ("eth0") or an address or host
  // name; at most one of them. Both empty: the default rule (GLOO_SOCKET_IFNAME, else the
  // address of the route to the store's host; phi::distributed::GlooOptions).
  std::string interface;
  std::string hostname;
};

class ProcessGroupNCCLOptions final : public ProcessGroupOptions {
 public:
  std::string backend() const override { return "nccl"; }
  // The group's comm stream takes the device's greatest priority (c10d's option of the name).
  bool is_high_priority_stream = false;
  // ncclConfig_t, used (ncclCommInitRankConfig) when any field is set; -1 / empty: NCCL's
  // default. blocking 0: a non-blocking communicator, polled up to the group's timeout.
  int blocking = -1;
  int cga_cluster_size = -1;
  int min_ctas = -1;
  int max_ctas = -1;
  std::string net_name;
};

}  // namespace distributed
}  // namespace paddle_like
