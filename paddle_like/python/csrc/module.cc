// paddle_like._C: the pybind11 extension under paddle_like.distributed.
#include <pybind11/pybind11.h>

PYBIND11_MODULE(_C, m) { m.doc() = "paddle_like's C++ runtime"; }
