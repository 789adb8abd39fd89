// DenseTensor: a shared allocation holder plus meta (dims, dtype, strides, byte offset).
//
// Views (Slice, FlatView, AsStrided) share the holder, so they alias the same bytes and keep
// the block alive. Strides are in elements; empty strides mean row-major contiguous.
#pragma once

#include <cstring>
#include <memory>
#include <vector>

#include "phi/core/allocator.h"
#include "phi/core/data_type.h"
#include "phi/core/ddim.h"
#include "phi/core/errors.h"
#include "phi/core/place.h"

namespace phi {

class Stream;

struct DenseTensorMeta {
  DataType dtype = DataType::UNDEFINED;
  DDim dims;
  std::vector<int64_t> strides;  // empty: contiguous
  size_t offset = 0;             // bytes from the holder's start
};

class DenseTensor {
 public:
  DenseTensor() = default;
  DenseTensor(std::shared_ptr<Allocation> holder, DenseTensorMeta meta);
  // Allocates a contiguous tensor from the stream-safe allocator of `place`.
  DenseTensor(const Place& place, DataType dtype, const DDim& dims);

  // A CPU tensor filled from host data (tests and examples).
  template <typename T>
  static DenseTensor FromVector(const std::vector<T>& values, DDim dims = DDim());
  // The elements as a host vector (copies from a device; gathers a strided view).
  template <typename T>
  std::vector<T> ToVector() const;

  bool initialized() const { return holder_ != nullptr; }
  const DDim& dims() const { return meta_.dims; }
  DataType dtype() const { return meta_.dtype; }
  const DenseTensorMeta& meta() const { return meta_; }
  Place place() const;
  int64_t numel() const { return meta_.dims.numel(); }
  size_t element_size() const { return SizeOf(meta_.dtype); }
  // Bytes the elements span when contiguous (numel * element size).
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  size_t offset() const { return meta_.offset; }
  const std::vector<int64_t>& strides() const { return meta_.strides; }
  bool IsContiguous() const;

  void* data();
  const void* data() const;
  template <typename T>
  T* data();
  template <typename T>
  const T* data() const;

  const std::shared_ptr<Allocation>& Holder() const { return holder_; }
  // Reshapes without moving data; numel must stay the same.
  void Resize(const DDim& dims);
  // Gives the tensor its own storage of `dims` x dtype on `place` (no-op when it already
  // has exactly that).
  void AllocateLike(const Place& place, DataType dtype, const DDim& dims);

  // Rows [begin, end) of dim 0; shares storage.
  DenseTensor Slice(int64_t begin, int64_t end) const;
  // A 1-D view of `numel` elements starting `offset` elements in; shares storage. The
  // tensor must be contiguous.
  DenseTensor FlatView(int64_t offset, int64_t numel) const;
  // An arbitrary strided view (element strides, element offset); shares storage.
  DenseTensor AsStrided(const DDim& dims, std::vector<int64_t> strides,
                        int64_t element_offset) const;

 private:
  void CheckDType(DataType expected) const;
  std::shared_ptr<Allocation> holder_;
  DenseTensorMeta meta_;
};

// Copies src into dst (dst is allocated on dst_place if it does not match). Host<->device
// copies go through the CUDA runtime; `stream` orders a device copy (nullptr: blocking).
// A non-contiguous src is gathered into a contiguous dst.
void Copy(const DenseTensor& src, const Place& dst_place, DenseTensor* dst,
          Stream* stream = nullptr);
// Sets every element to `value` (converted to the tensor's dtype).
void Fill(DenseTensor* t, double value);

// ------------------------------------------------------------------ templates
template <typename T>
DenseTensor DenseTensor::FromVector(const std::vector<T>& values, DDim dims) {
  if (dims.size() == 0) dims = DDim({static_cast<int64_t>(values.size())});
  PADDLE_ENFORCE_EQ(dims.numel(), static_cast<int64_t>(values.size()),
                    errors::InvalidArgument("FromVector: dims %s do not match %zu values",
                                            dims.to_str().c_str(), values.size()));
  DenseTensor t(CPUPlace(), CppTypeToDataType<T>::Type(), dims);
  if (!values.empty()) std::memcpy(t.data(), values.data(), values.size() * sizeof(T));
  return t;
}

template <typename T>
std::vector<T> DenseTensor::ToVector() const {
  CheckDType(CppTypeToDataType<T>::Type());
  DenseTensor host;
  Copy(*this, CPUPlace(), &host);
  std::vector<T> out(static_cast<size_t>(numel()));
  if (!out.empty()) std::memcpy(out.data(), host.data(), out.size() * sizeof(T));
  return out;
}

template <typename T>
T* DenseTensor::data() {
  CheckDType(CppTypeToDataType<T>::Type());
  return static_cast<T*>(data());
}

template <typename T>
const T* DenseTensor::data() const {
  CheckDType(CppTypeToDataType<T>::Type());
  return static_cast<const T*>(data());
}

}  // namespace phi
