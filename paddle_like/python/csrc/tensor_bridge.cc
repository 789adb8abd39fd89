#include "tensor_bridge.h"

#include <string>

#include "phi/core/errors.h"

namespace py = pybind11;

namespace paddle_like {
namespace python {
namespace {

// Owns a Py_buffer; releases it (and so the exporter's memory) with the GIL held. A release
// that comes after the interpreter began finalizing leaks the buffer instead: Python frees
// everything then anyway, and touching its objects could crash.
class PyBufferAllocation : public phi::Allocation {
 public:
  PyBufferAllocation(Py_buffer* view, size_t bytes)
      : phi::Allocation(view->buf, bytes, phi::CPUPlace()), view_(view) {}
  ~PyBufferAllocation() override {
    if (!Py_IsInitialized() || _Py_IsFinalizing()) return;
    py::gil_scoped_acquire gil;
    PyBuffer_Release(view_);
    delete view_;
  }

 private:
  Py_buffer* view_;
};

phi::DataType DTypeOf(const Py_buffer& view, const char* what) {
  std::string f = view.format ? view.format : "B";
  if (!f.empty() && (f[0] == '<' || f[0] == '=' || f[0] == '@' || f[0] == '|')) f = f.substr(1);
  const auto size = view.itemsize;
  if (f == "?") return phi::DataType::BOOL;
  if (f == "b") return phi::DataType::INT8;
  if (f == "B") return phi::DataType::UINT8;
  if (f == "e") return phi::DataType::FLOAT16;
  if (f == "f") return phi::DataType::FLOAT32;
  if (f == "d") return phi::DataType::FLOAT64;
  if (f == "Zf") return phi::DataType::COMPLEX64;
  if (f == "Zd") return phi::DataType::COMPLEX128;
  if ((f == "i" || f == "l" || f == "q") && size == 4) return phi::DataType::INT32;
  if ((f == "i" || f == "l" || f == "q") && size == 8) return phi::DataType::INT64;
  throw py::type_error(std::string(what) + ": element type '" + f + "' (" +
                       std::to_string(size) +
                       " bytes) is not supported; expected one of bool, int8, uint8, int32, "
                       "int64, float16, float32, float64, complex64, complex128");
}

}  // namespace

phi::DenseTensor TensorFromBuffer(const py::handle& obj, bool writable, const char* what) {
  if (!PyObject_CheckBuffer(obj.ptr())) {
    throw py::type_error(std::string(what) + ": expected an array (numpy or DLPack), got " +
                         std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
  }
  auto* view = new Py_buffer();
  int flags = PyBUF_STRIDES | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(obj.ptr(), view, flags) != 0) {
    delete view;
    PyErr_Clear();
    throw py::value_error(std::string(what) +
                          (writable ? ": the array is read-only, but this op writes it"
                                    : ": cannot read the array's buffer"));
  }
  std::vector<int64_t> dims(view->shape, view->shape + view->ndim);
  // Contiguous in row-major order (unit dims and empty arrays have arbitrary strides).
  int64_t expect = view->itemsize;
  bool contiguous = true;
  int64_t numel = 1;
  for (int i = view->ndim - 1; i >= 0; --i) {
    numel *= dims[i];
    if (dims[i] != 1 && view->strides[i] != expect) contiguous = false;
    expect *= dims[i];
  }
  if (numel == 0) contiguous = true;
  phi::DataType dtype;
  try {
    dtype = DTypeOf(*view, what);
  } catch (...) {
    PyBuffer_Release(view);
    delete view;
    throw;
  }
  if (!contiguous) {
    PyBuffer_Release(view);
    delete view;
    throw py::value_error(std::string(what) +
                          ": the array is not contiguous; collectives read and write memory "
                          "in place, so pass a C-contiguous array (numpy.ascontiguousarray "
                          "makes a copy whose result you then copy back)");
  }
  const size_t bytes = static_cast<size_t>(numel) * view->itemsize;
  auto holder = std::make_shared<PyBufferAllocation>(view, bytes);
  phi::DenseTensorMeta meta;
  meta.dtype = dtype;
  meta.dims = phi::DDim(dims);
  return phi::DenseTensor(holder, meta);
}

std::vector<phi::DenseTensor> TensorsFromList(const py::handle& list, bool writable,
                                              const char* what) {
  std::vector<phi::DenseTensor> out;
  for (const auto& item : py::reinterpret_borrow<py::sequence>(list)) {
    out.push_back(TensorFromBuffer(item, writable, what));
  }
  return out;
}

}  // namespace python
}  // namespace paddle_like
