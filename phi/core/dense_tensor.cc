#include "phi/core/dense_tensor.h"

#include "phi/core/memcpy.h"

namespace phi {

DenseTensor::DenseTensor(std::shared_ptr<Allocation> holder, DenseTensorMeta meta)
    : holder_(std::move(holder)), meta_(std::move(meta)) {}

DenseTensor::DenseTensor(const Place& place, DataType dtype, const DDim& dims) {
  AllocateLike(place, dtype, dims);
}

Place DenseTensor::place() const { return holder_ ? holder_->place() : CPUPlace(); }

bool DenseTensor::IsContiguous() const {
  if (meta_.strides.empty()) return true;
  int64_t expected = 1;
  for (int i = meta_.dims.size() - 1; i >= 0; --i) {
    if (meta_.dims[i] != 1 && meta_.strides[i] != expected) return false;
    expected *= meta_.dims[i];
  }
  return true;
}

void* DenseTensor::data() {
  PADDLE_ENFORCE_NOT_NULL(holder_, errors::PreconditionNotMet(
                                       "The tensor has no storage; allocate it first."));
  return static_cast<char*>(holder_->ptr()) + meta_.offset;
}

const void* DenseTensor::data() const { return const_cast<DenseTensor*>(this)->data(); }

void DenseTensor::CheckDType(DataType expected) const {
  PADDLE_ENFORCE_EQ(meta_.dtype, expected,
                    errors::InvalidArgument("The tensor's data type is %s, but %s was asked for.",
                                            DataTypeToString(meta_.dtype),
                                            DataTypeToString(expected)));
}

void DenseTensor::Resize(const DDim& dims) {
  PADDLE_ENFORCE_EQ(dims.numel(), numel(),
                    errors::InvalidArgument("Resize from %s to %s changes the element count.",
                                            meta_.dims.to_str().c_str(),
                                            dims.to_str().c_str()));
  meta_.dims = dims;
  meta_.strides.clear();
}

void DenseTensor::AllocateLike(const Place& place, DataType dtype, const DDim& dims) {
  size_t bytes = static_cast<size_t>(dims.numel()) * SizeOf(dtype);
  if (holder_ && holder_->place() == place && meta_.offset == 0 && IsContiguous() &&
      holder_->size() == bytes && meta_.dtype == dtype) {
    meta_.dims = dims;
    return;
  }
  holder_ = memory::Alloc(place, bytes);
  meta_ = DenseTensorMeta{dtype, dims, {}, 0};
}

DenseTensor DenseTensor::Slice(int64_t begin, int64_t end) const {
  PADDLE_ENFORCE_GE(meta_.dims.size(), 1,
                    errors::InvalidArgument("Slice needs a tensor of rank >= 1."));
  int64_t rows = meta_.dims[0];
  PADDLE_ENFORCE(0 <= begin && begin <= end && end <= rows,
                 errors::OutOfRange("Slice [%lld, %lld) is outside dim 0 of size %lld.",
                                    static_cast<long long>(begin),
                                    static_cast<long long>(end),
                                    static_cast<long long>(rows)));
  PADDLE_ENFORCE(IsContiguous(),
                 errors::InvalidArgument("Slice needs a contiguous tensor."));
  DenseTensor out = *this;
  int64_t row_elems = rows == 0 ? 0 : numel() / rows;
  out.meta_.dims[0] = end - begin;
  out.meta_.offset += static_cast<size_t>(begin * row_elems) * element_size();
  return out;
}

DenseTensor DenseTensor::FlatView(int64_t offset, int64_t n) const {
  PADDLE_ENFORCE(IsContiguous(),
                 errors::InvalidArgument("FlatView needs a contiguous tensor."));
  PADDLE_ENFORCE(offset >= 0 && n >= 0 && offset <= numel() && n <= numel() - offset,  // no wrap
                 errors::OutOfRange(
                     "Partial view (offset %lld, numel %lld) exceeds the tensor's %lld elements.",
                     static_cast<long long>(offset), static_cast<long long>(n),
                     static_cast<long long>(numel())));
  DenseTensor out = *this;
  out.meta_.dims = DDim({n});
  out.meta_.strides.clear();
  out.meta_.offset += static_cast<size_t>(offset) * element_size();
  return out;
}

DenseTensor DenseTensor::AsStrided(const DDim& dims, std::vector<int64_t> strides,
                                   int64_t element_offset) const {
  PADDLE_ENFORCE_EQ(static_cast<int>(strides.size()), dims.size(),
                    errors::InvalidArgument("AsStrided: one stride per dimension."));
  int64_t last = element_offset;
  for (int i = 0; i < dims.size(); ++i) last += (dims[i] - 1) * strides[i];
  PADDLE_ENFORCE(holder_ && static_cast<size_t>(last + 1) * element_size() + meta_.offset <=
                                holder_->size(),
                 errors::OutOfRange("AsStrided view reaches past the allocation."));
  DenseTensor out = *this;
  out.meta_.dims = dims;
  out.meta_.strides = std::move(strides);
  out.meta_.offset += static_cast<size_t>(element_offset) * element_size();
  return out;
}

namespace {
// Gathers a strided host tensor into contiguous host memory.
void GatherStrided(const DenseTensor& src, void* dst) {
  const auto& dims = src.dims();
  const auto& strides = src.strides();
  size_t es = src.element_size();
  const char* base = static_cast<const char*>(src.data());
  std::vector<int64_t> idx(dims.size(), 0);
  char* out = static_cast<char*>(dst);
  for (int64_t n = 0; n < src.numel(); ++n) {
    int64_t off = 0;
    for (int d = 0; d < dims.size(); ++d) off += idx[d] * strides[d];
    std::memcpy(out + n * es, base + off * es, es);
    for (int d = dims.size() - 1; d >= 0; --d) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
    }
  }
}
}  // namespace

void Copy(const DenseTensor& src, const Place& dst_place, DenseTensor* dst, Stream* stream) {
  PADDLE_ENFORCE(src.initialized(), errors::PreconditionNotMet("Copy from an empty tensor."));
  if (dst != &src) dst->AllocateLike(dst_place, src.dtype(), src.dims());
  if (src.numel() == 0) return;
  if (!src.IsContiguous()) {
    PADDLE_ENFORCE(src.place().is_cpu(),
                   errors::Unimplemented("Copying a strided device tensor is not supported."));
    if (dst_place.is_cpu()) {
      GatherStrided(src, dst->data());
    } else {
      DenseTensor tmp(CPUPlace(), src.dtype(), src.dims());
      GatherStrided(src, tmp.data());
      memory::Copy(dst_place, dst->data(), CPUPlace(), tmp.data(), src.nbytes(), stream);
    }
    return;
  }
  memory::Copy(dst_place, dst->data(), src.place(), src.data(), src.nbytes(), stream);
}

void Fill(DenseTensor* t, double value) {
  PADDLE_ENFORCE(t->initialized() && t->IsContiguous(),
                 errors::InvalidArgument("Fill needs an allocated, contiguous tensor."));
  DenseTensor host(CPUPlace(), t->dtype(), t->dims());
  VisitDataType(t->dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v = static_cast<T>(value);
    T* p = static_cast<T*>(host.data());
    for (int64_t i = 0; i < host.numel(); ++i) p[i] = v;
  });
  if (t->place().is_cpu()) {
    std::memcpy(t->data(), host.data(), t->nbytes());
  } else {
    memory::Copy(t->place(), t->data(), CPUPlace(), host.data(), t->nbytes(), nullptr);
  }
}

}  // namespace phi
