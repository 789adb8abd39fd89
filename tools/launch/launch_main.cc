// launch: starts the ranks of a job (see launch_options.cc for the command line).
#include "tools/launch/launch_options.h"
#include "tools/launch/launcher.h"

int main(int argc, char** argv) {
  auto options = paddle_like::launch::ParseLaunchOptions(argc, argv);
  return paddle_like::launch::RunJob(options);
}
