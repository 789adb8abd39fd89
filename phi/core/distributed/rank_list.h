// Ranks as every message of the runtime lists them: "0, 2, 3" ("none" when there are none).
#pragma once

#include <string>
#include <vector>

namespace phi {
namespace distributed {

std::string JoinRanks(const std::vector<int>& ranks);

}  // namespace distributed
}  // namespace phi
