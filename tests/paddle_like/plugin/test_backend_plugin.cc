// A backend plugin as a user would build one: a shared library that registers a backend
// when loaded. It links none of the runtime: the program that loads it exports its copy.
#include "distributed/process_group_gloo.h"
#include "paddle_like/dist/distributed.h"

extern "C" void paddle_like_backend_plugin_init() {
  paddle_like::dist::register_backend(
      "plugin_gloo",
      [](const paddle_like::distributed::BackendOptions& o)
          -> std::shared_ptr<paddle_like::distributed::ProcessGroup> {
        return std::make_shared<paddle_like::distributed::ProcessGroupGloo>(
            o.store, o.rank, o.size, o.gid, o.timeout);
      },
      {"cpu"});
}
