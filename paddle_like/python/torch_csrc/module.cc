// paddle_like._torch_backend: the Python binding of the torch.distributed backend (kept thin:
// paddle_like/torch_backend.py registers it with torch). Import torch.distributed first, so
// that pybind11 knows torch's c10d::Store and c10d::ProcessGroup types.
#include <chrono>
#include <string>
#include <vector>

#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "distributed/backend_registry.h"
#include "process_group_paddle.h"

namespace py = pybind11;

PYBIND11_MODULE(_torch_backend, m) {
  m.doc() = "paddle_like as a torch.distributed backend (c10d::ProcessGroup)";
  m.def("create_process_group", &paddle_like::torch_backend::CreateProcessGroupPaddle,
        py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
        py::arg("group_name") = std::string("0"), py::call_guard<py::gil_scoped_release>(),
        "A paddle_like process group over torch's store (what the registered creator "
        "returns).");
  m.def("engine_backends",
        [] { return paddle_like::distributed::BackendRegistry::Instance().Names(); },
        "The engine backends this build has (\"gloo\", and \"nccl\" where CUDA is built).");
}
