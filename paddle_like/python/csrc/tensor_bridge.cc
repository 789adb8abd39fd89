#include "tensor_bridge.h"

#include <cstring>
#include <memory>
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

struct BufferRelease {
  void operator()(Py_buffer* view) const {
    PyBuffer_Release(view);
    delete view;
  }
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

// DLPack's C ABI (dlpack.h, stable since v0.2): what a producer's __dlpack__() capsule
// ("dltensor") holds. Declared here rather than included: no Debian package ships the header.
struct DLDevice {
  int32_t device_type;  // 1: CPU
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // 0 int, 1 uint, 2 float, 4 bfloat, 5 complex, 6 bool
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null: row-major contiguous
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

// Owns a consumed DLPack tensor; calls its producer's deleter with the GIL held.
class DLPackAllocation : public phi::Allocation {
 public:
  DLPackAllocation(DLManagedTensor* t, void* data, size_t bytes)
      : phi::Allocation(data, bytes, phi::CPUPlace()), t_(t) {}
  ~DLPackAllocation() override {
    if (!Py_IsInitialized() || _Py_IsFinalizing() || t_->deleter == nullptr) return;
    py::gil_scoped_acquire gil;
    t_->deleter(t_);
  }

 private:
  DLManagedTensor* t_;
};

phi::DataType DTypeOf(const DLDataType& t, const std::string& hint, const char* what) {
  if (t.lanes == 1) {
    if (hint == "bool" && t.bits == 8) return phi::DataType::BOOL;  // bool sent as uint8
    switch (t.code) {
      case 0:
        if (t.bits == 8) return phi::DataType::INT8;
        if (t.bits == 32) return phi::DataType::INT32;
        if (t.bits == 64) return phi::DataType::INT64;
        break;
      case 1:
        if (t.bits == 8) return phi::DataType::UINT8;
        break;
      case 2:
        if (t.bits == 16) return phi::DataType::FLOAT16;
        if (t.bits == 32) return phi::DataType::FLOAT32;
        if (t.bits == 64) return phi::DataType::FLOAT64;
        break;
      case 4:
        if (t.bits == 16) return phi::DataType::BFLOAT16;
        break;
      case 5:
        if (t.bits == 64) return phi::DataType::COMPLEX64;
        if (t.bits == 128) return phi::DataType::COMPLEX128;
        break;
      case 6:
        if (t.bits == 8) return phi::DataType::BOOL;
        break;
    }
  }
  throw py::type_error(std::string(what) + ": DLPack element type (code " +
                       std::to_string(t.code) + ", " + std::to_string(t.bits) + " bits, " +
                       std::to_string(t.lanes) + " lanes) is not supported");
}

// Whether `dims` laid out with `strides` (in units of `unit` bytes per element step; null:
// row-major by definition) is row-major contiguous. Unit dims may have any stride, and an
// empty tensor is contiguous.
bool IsRowMajor(const std::vector<int64_t>& dims, const int64_t* strides, int64_t unit) {
  if (strides == nullptr) return true;
  int64_t expect = unit, numel = 1;
  bool contiguous = true;
  for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
    numel *= dims[i];
    if (dims[i] != 1 && strides[i] != expect) contiguous = false;
    expect *= dims[i];
  }
  return contiguous || numel == 0;
}

// The contiguous tensor of `dims` x `dtype` over `holder`'s memory.
phi::DenseTensor MakeTensor(std::shared_ptr<phi::Allocation> holder, phi::DataType dtype,
                            std::vector<int64_t> dims) {
  phi::DenseTensorMeta meta;
  meta.dtype = dtype;
  meta.dims = phi::DDim(std::move(dims));
  return phi::DenseTensor(std::move(holder), meta);
}

phi::DenseTensor TensorFromDLPack(const py::capsule& capsule, const std::string& hint,
                                  const char* what) {
  if (std::string(capsule.name() ? capsule.name() : "") != "dltensor") {
    throw py::value_error(std::string(what) +
                          ": the DLPack capsule was already consumed (each __dlpack__() "
                          "result can be used once)");
  }
  auto* t = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  const DLTensor& d = t->dl_tensor;
  if (d.device.device_type != 1) {
    throw py::value_error(std::string(what) + ": only CPU tensors are supported here (DLPack "
                          "device type " + std::to_string(d.device.device_type) + ")");
  }
  const phi::DataType dtype = DTypeOf(d.dtype, hint, what);
  std::vector<int64_t> dims(d.shape, d.shape + d.ndim);
  const int64_t numel = phi::DDim(dims).numel();
  if (!IsRowMajor(dims, d.strides, 1)) {
    throw py::value_error(std::string(what) +
                          ": the tensor is not contiguous; collectives read and write memory "
                          "in place, so pass a contiguous tensor (.contiguous() copies)");
  }
  // Consumed: from now on the deleter is ours to call (DLPack's protocol).
  PyCapsule_SetName(capsule.ptr(), "used_dltensor");
  void* data = static_cast<char*>(d.data) + d.byte_offset;
  return MakeTensor(std::make_shared<DLPackAllocation>(t, data, numel * phi::SizeOf(dtype)),
                    dtype, std::move(dims));
}

}  // namespace

phi::DenseTensor TensorFromBuffer(const py::handle& obj, bool writable, const char* what) {
  // (array, dtype hint) from paddle_like.distributed for DLPack producers.
  if (py::isinstance<py::tuple>(obj)) {
    auto pair = py::reinterpret_borrow<py::tuple>(obj);
    if (pair.size() == 2 && py::isinstance<py::capsule>(pair[0])) {
      return TensorFromDLPack(pair[0].cast<py::capsule>(), pair[1].cast<std::string>(), what);
    }
  }
  if (py::isinstance<py::capsule>(obj)) {
    return TensorFromDLPack(py::reinterpret_borrow<py::capsule>(obj), "", what);
  }
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
  // Ours from here on: released (the GIL is held) unless handed to the allocation.
  std::unique_ptr<Py_buffer, BufferRelease> owned(view);
  std::vector<int64_t> dims(view->shape, view->shape + view->ndim);
  const phi::DataType dtype = DTypeOf(*view, what);
  const std::vector<int64_t> strides(view->strides, view->strides + view->ndim);  // bytes
  if (!IsRowMajor(dims, strides.data(), view->itemsize)) {
    throw py::value_error(std::string(what) +
                          ": the array is not contiguous; collectives read and write memory "
                          "in place, so pass a C-contiguous array (numpy.ascontiguousarray "
                          "makes a copy whose result you then copy back)");
  }
  const size_t bytes = static_cast<size_t>(phi::DDim(dims).numel()) * view->itemsize;
  return MakeTensor(std::make_shared<PyBufferAllocation>(owned.release(), bytes), dtype,
                    std::move(dims));
}

std::vector<phi::DenseTensor> TensorsFromList(const py::handle& list, bool writable,
                                              const char* what) {
  std::vector<phi::DenseTensor> out;
  for (const auto& item : py::reinterpret_borrow<py::sequence>(list)) {
    out.push_back(TensorFromBuffer(item, writable, what));
  }
  return out;
}

void CopyInto(const py::handle& dst, const py::handle& src) {
  auto d = TensorFromBuffer(dst, true, "copy destination");
  auto s = TensorFromBuffer(src, false, "copy source");
  if (d.nbytes() != s.nbytes() || d.dtype() != s.dtype()) {
    throw py::value_error("copy: destination has " + std::to_string(d.numel()) + " " +
                          phi::DataTypeToString(d.dtype()) + " elements, source " +
                          std::to_string(s.numel()) + " " + phi::DataTypeToString(s.dtype()));
  }
  py::gil_scoped_release nogil;
  if (d.nbytes() > 0) std::memcpy(d.data(), s.data(), d.nbytes());
}

}  // namespace python
}  // namespace paddle_like
