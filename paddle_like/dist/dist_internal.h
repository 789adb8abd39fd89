// Helpers shared by paddle_like::dist's .cc files (not installed).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "paddle_like/dist/distributed.h"
#include "phi/core/dense_tensor.h"

namespace paddle_like {
namespace dist {

// What a Future is: the Work's own (callback null: it ends with the op) or a then() (it ends
// once `before` has and its callback has run). Complete() runs it in the calling thread unless
// another thread already is, then waits for that one.
struct FutureState {
  static constexpr int kPending = 0, kRunning = 1, kDone = 2;
  std::shared_ptr<Work> work;
  std::shared_ptr<FutureState> before;
  std::function<void(Work&)> callback;
  std::atomic<int> phase{kPending};
  std::exception_ptr error;  // written before phase becomes kDone
  std::mutex mu;
  std::condition_variable cv;
  // The op ended and so can every future before this one: Complete() will not block (on
  // anything but a callback).
  bool Ready() const;
  void Complete();
};

// The process's one thread that completes then() futures nobody waits for (Future's comment).
class FutureCompletions {
 public:
  static FutureCompletions& Instance();
  void Watch(std::shared_ptr<FutureState> state);

 private:
  FutureCompletions() = default;
  void Loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<FutureState>> pending_;
  bool started_ = false;
};

// Backend configs (backends.cc). Lower-case copy of `s`.
std::string Lower(std::string s);
// "cpu:gloo,cuda:nccl" where NCCL is built, else "cpu:gloo".
std::string DefaultBackendConfig();
// "gloo" -> {cpu: gloo}; "cpu:gloo,cuda:nccl" -> both. Unknown backends and devices a
// backend does not serve raise InvalidArgument.
std::map<std::string, std::string> ParseBackendConfig(const std::string& config);

// The group a collective runs on (null: the world), or null when this rank is not in it:
// the call then does nothing and returns a null Work (warned once per process).
GroupPtr ResolveGroup(const GroupPtr& group, const char* op);

// The store init_process_group rendezvoused on (no group prefix), and the rank init gave
// this process (stable across a shrink of the world, which renumbers ranks).
std::shared_ptr<Store> RootStore();
int InitRank();

// The group rank `r` names in `g` (a global rank converted, a GroupRank checked against the
// group's size); InvalidArgument naming `what` ("broadcast src") and the group otherwise.
int GroupRankOf(const GroupPtr& g, RankArg r, const char* what);


// "cuda" for a GPU tensor, "cpu" otherwise: the key of a group's backend map.
std::string DeviceOf(const phi::DenseTensor& t);

// A list of `expected_len` tensors as one tensor of as many blocks, each `numel` elements
// (-1: the first tensor's) of one dtype and place, contiguous. Raises InvalidArgument
// naming `op` and the offending entry.
phi::DenseTensor FlattenList(const std::vector<phi::DenseTensor>& list, int expected_len,
                             int64_t numel, const char* op);

// The inverse: `flat` holds `parts` blocks of like.numel() elements; (*list)[r] gets block r,
// shaped like `like`. An empty list is filled; a given one must hold contiguous tensors of
// like's size and dtype (InvalidArgument naming `op` otherwise).
void SplitInto(const phi::DenseTensor& flat, const phi::DenseTensor& like, int parts,
               std::vector<phi::DenseTensor>* list, const char* op);
// SplitInto's checks and allocation alone, before the op (the copy comes after it ends).
void PrepareSplit(const phi::DenseTensor& like, int parts, std::vector<phi::DenseTensor>* list,
                  const char* op);

}  // namespace dist
}  // namespace paddle_like
