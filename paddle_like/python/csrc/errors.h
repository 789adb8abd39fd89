// The runtime's typed errors (phi::EnforceNotMet and its subclasses) as Python exceptions.
#pragma once

#include <pybind11/pybind11.h>

namespace paddle_like {
namespace python {

// Defines paddle_like._C.DistError (a RuntimeError) and its subclasses DistTimeoutError,
// DistNetworkError and DistBackendError, and translates every runtime error into the Python
// exception of its kind with the C++ message:
//   InvalidArgument, OutOfRange -> ValueError      Timeout     -> DistTimeoutError
//   PreconditionNotMet          -> RuntimeError    Unavailable -> DistNetworkError
//   Unimplemented               -> NotImplementedError
//   NotFound                    -> LookupError     External    -> DistBackendError
void BindErrors(pybind11::module_& m);

}  // namespace python
}  // namespace paddle_like
