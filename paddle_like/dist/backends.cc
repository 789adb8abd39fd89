// Backends as paddle_like::dist sees them: configs (a backend name, "gloo", or a device map,
// "cpu:gloo,cuda:nccl") parsed against the backend registry, and the registration of new
// backends (register_backend, load_backend_plugin).
#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <sstream>

#include "distributed/backend_registry.h"
#include "paddle_like/dist/dist_internal.h"
#include "phi/core/errors.h"

namespace paddle_like {
namespace dist {

using distributed::BackendRegistry;

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string DefaultBackendConfig() {
  return BackendRegistry::Instance().Has("nccl") ? "cpu:gloo,cuda:nccl" : "cpu:gloo";
}

// "gloo" -> {cpu: gloo}; "cpu:gloo,cuda:nccl" -> both. Unknown backends and devices a
// backend does not serve raise InvalidArgument.
std::map<std::string, std::string> ParseBackendConfig(const std::string& config) {
  auto& registry = BackendRegistry::Instance();
  std::map<std::string, std::string> by_device;
  auto need = [&](const std::string& backend) {
    PADDLE_ENFORCE(registry.Has(backend),
                   phi::errors::InvalidArgument(
                       "Backend '%s' is not available in this build (available: %s).",
                       backend.c_str(), [&] {
                         std::string all;
                         for (const auto& n : registry.Names()) all += (all.empty() ? "" : ", ") + n;
                         return all;
                       }().c_str()));
  };
  if (config.find(':') == std::string::npos) {
    const std::string backend = Lower(config);
    need(backend);
    for (const auto& device : registry.Devices(backend)) by_device[device] = backend;
    return by_device;
  }
  std::stringstream items(config);
  std::string item;
  while (std::getline(items, item, ',')) {
    const size_t colon = item.find(':');
    PADDLE_ENFORCE(colon != std::string::npos && colon > 0 && colon + 1 < item.size(),
                   phi::errors::InvalidArgument(
                       "Backend config '%s': each item is device:backend, but one is '%s'.",
                       config.c_str(), item.c_str()));
    const std::string device = Lower(item.substr(0, colon));
    const std::string backend = Lower(item.substr(colon + 1));
    need(backend);
    const auto devices = registry.Devices(backend);
    PADDLE_ENFORCE(std::find(devices.begin(), devices.end(), device) != devices.end(),
                   phi::errors::InvalidArgument(
                       "Backend config '%s': backend '%s' does not serve device '%s'.",
                       config.c_str(), backend.c_str(), device.c_str()));
    PADDLE_ENFORCE(by_device.count(device) == 0,
                   phi::errors::InvalidArgument("Backend config '%s' names device '%s' twice.",
                                                config.c_str(), device.c_str()));
    by_device[device] = backend;
  }
  return by_device;
}

void load_backend_plugin(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  PADDLE_ENFORCE_NOT_NULL(handle, phi::errors::InvalidArgument(
                                      "load_backend_plugin: cannot load '%s': %s", path.c_str(),
                                      dlerror()));
  using Init = void (*)();
  auto init = reinterpret_cast<Init>(dlsym(handle, "paddle_like_backend_plugin_init"));
  if (init == nullptr) {
    dlclose(handle);
    PADDLE_THROW(phi::errors::InvalidArgument(
        "load_backend_plugin: '%s' has no paddle_like_backend_plugin_init().", path.c_str()));
  }
  init();  // the library stays loaded: its backend's creator lives in it
}

void register_backend(const std::string& name, distributed::BackendCreator creator,
                      const std::vector<std::string>& devices) {
  // ':' and ',' separate the items of a backend config ("cpu:gloo,cuda:nccl").
  PADDLE_ENFORCE(!name.empty() && name.find_first_of(":,") == std::string::npos,
                 phi::errors::InvalidArgument(
                     "register_backend: a backend name must be a single non-empty identifier "
                     "(no ':' or ','), got '%s'.",
                     name.c_str()));
  distributed::BackendRegistry::Instance().Register(
      name, std::move(creator), devices.empty() ? std::vector<std::string>{"cpu"} : devices);
}

}  // namespace dist
}  // namespace paddle_like
