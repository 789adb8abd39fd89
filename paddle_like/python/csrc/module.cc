// paddle_like._C: the pybind11 extension under paddle_like.distributed (the seed's
// tensorplay._C._distributed). Thin by design: the checks and the seed's semantics are in
// the Python files, the communication in the C++ runtime.
#include <cstdlib>

#include <glog/logging.h>
#include <pybind11/pybind11.h>

#include "errors.h"

namespace py = pybind11;

namespace paddle_like {
namespace python {
void BindDist(py::module_& m);
void BindStores(py::module_& m);
}  // namespace python
}  // namespace paddle_like

PYBIND11_MODULE(_C, m) {
  m.doc() = "paddle_like's C++ runtime";
  // A Python program has not initialised glog; without this, the first log line of ours
  // would come with glog's "Logging before InitGoogleLogging()" warning, and initialised
  // with glog's defaults it would write log files to /tmp. So: warnings and worse on stderr,
  // no files; errors that are raised reach the program as exceptions. GLOG_minloglevel,
  // GLOG_logtostderr and GLOG_v in the environment still choose otherwise.
  if (!google::IsGoogleLoggingInitialized()) {
    if (std::getenv("GLOG_minloglevel") == nullptr) FLAGS_minloglevel = google::GLOG_WARNING;
    if (std::getenv("GLOG_logtostderr") == nullptr && std::getenv("GLOG_log_dir") == nullptr) {
      FLAGS_logtostderr = true;
    }
    google::InitGoogleLogging("paddle_like");
  }
  paddle_like::python::BindErrors(m);
  paddle_like::python::BindStores(m);
  paddle_like::python::BindDist(m);
}
