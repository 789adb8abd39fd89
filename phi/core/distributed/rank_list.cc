#include "phi/core/distributed/rank_list.h"

namespace phi {
namespace distributed {

std::string JoinRanks(const std::vector<int>& ranks) {
  if (ranks.empty()) return "none";
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

}  // namespace distributed
}  // namespace phi
