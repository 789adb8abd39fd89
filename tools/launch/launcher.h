// The launcher: hosts the store, starts the ranks, relays their output, supervises them.
#pragma once

#include "tools/launch/launch_options.h"

namespace paddle_like {
namespace launch {

// Runs the job to its end and returns the launcher's exit status: 0 when every rank exited
// 0; else the failing rank's exit code (128 + signal when it was killed), or 128 + the
// signal that stopped the launcher.
int RunJob(const LaunchOptions& options);

}  // namespace launch
}  // namespace paddle_like
