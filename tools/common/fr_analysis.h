// Reads the flight-recorder dumps the comm watchdog writes (fr_g<gid>_r<rank>.txt, see
// distributed/watchdog.h) and finds, per group, the first collective sequence number where
// the ranks diverge: a rank that never issued it, or ranks that issued different ops (type,
// dtype, sizes, root/peer, reduce op). Point-to-point ops (p2p_seq != 0) involve their two
// ends only and are not compared. tools/fr_trace prints it; launch prints it after a watchdog
// timeout.
#pragma once

#include <string>

namespace paddle_like {
namespace tools {

// The analysis of every dump in `dir`, one paragraph per group. Raises std::runtime_error
// when `dir` has no dump or a dump cannot be parsed (naming the file and line).
std::string AnalyzeFlightRecorderDumps(const std::string& dir);

}  // namespace tools
}  // namespace paddle_like
