#include "errors.h"

#include "phi/core/errors.h"

namespace py = pybind11;

namespace paddle_like {
namespace python {

void BindErrors(py::module_& m) {
  static py::exception<phi::EnforceNotMet> dist_error(m, "DistError", PyExc_RuntimeError);
  static py::object timeout_error = py::reinterpret_steal<py::object>(PyErr_NewExceptionWithDoc(
      "paddle_like._C.DistTimeoutError",
      "An op or a wait did not complete within its timeout (a rank is gone or stuck).",
      dist_error.ptr(), nullptr));
  static py::object network_error = py::reinterpret_steal<py::object>(PyErr_NewExceptionWithDoc(
      "paddle_like._C.DistNetworkError",
      "A peer could not be reached or closed its connection.", dist_error.ptr(), nullptr));
  static py::object backend_error = py::reinterpret_steal<py::object>(PyErr_NewExceptionWithDoc(
      "paddle_like._C.DistBackendError", "The communication engine reported an error.",
      dist_error.ptr(), nullptr));
  m.attr("DistTimeoutError") = timeout_error;
  m.attr("DistNetworkError") = network_error;
  m.attr("DistBackendError") = backend_error;

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const phi::EnforceNotMet& e) {
      PyObject* type = dist_error.ptr();
      switch (e.code()) {
        case phi::ErrorCode::kInvalidArgument:
        case phi::ErrorCode::kOutOfRange:
          type = PyExc_ValueError;
          break;
        case phi::ErrorCode::kPreconditionNotMet:
          type = PyExc_RuntimeError;
          break;
        case phi::ErrorCode::kUnimplemented:
          type = PyExc_NotImplementedError;
          break;
        case phi::ErrorCode::kNotFound:
          type = PyExc_LookupError;
          break;
        case phi::ErrorCode::kTimeout:
          type = timeout_error.ptr();
          break;
        case phi::ErrorCode::kUnavailable:
          type = network_error.ptr();
          break;
        case phi::ErrorCode::kExternal:
          type = backend_error.ptr();
          break;
      }
      PyErr_SetString(type, e.what());
    }
  });
}

}  // namespace python
}  // namespace paddle_like
