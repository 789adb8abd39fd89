// DenseTensor views alias their base (Slice, FlatView, AsStrided), contiguity of strided
// views, Copy gathering a strided view, FromVector/ToVector, and the errors of bad views.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "phi/core/dense_tensor.h"
#include "phi/core/errors.h"

namespace {

using phi::DDim;
using phi::DenseTensor;

std::vector<float> Iota(int n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}

TEST(DenseTensorTest, FromVectorToVectorRoundTrip) {
  std::vector<int64_t> values = {5, -3, 1LL << 40, 0, 7, 9};
  DenseTensor t = DenseTensor::FromVector(values, DDim({2, 3}));
  EXPECT_EQ(t.dims(), DDim({2, 3}));
  EXPECT_EQ(t.dtype(), phi::DataType::INT64);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.nbytes(), 48u);
  EXPECT_TRUE(t.IsContiguous());
  EXPECT_EQ(t.place(), phi::CPUPlace());
  EXPECT_EQ(t.ToVector<int64_t>(), values);
  EXPECT_THROW(t.ToVector<int32_t>(), phi::InvalidArgumentError) << "wrong dtype";
  EXPECT_THROW(DenseTensor::FromVector(values, DDim({4, 2})), phi::InvalidArgumentError);
  // A 1-D tensor by default.
  auto f = DenseTensor::FromVector(std::vector<double>{1.5, 2.5});
  EXPECT_EQ(f.dims(), DDim({2}));
  EXPECT_EQ(f.ToVector<double>(), (std::vector<double>{1.5, 2.5}));
}

TEST(DenseTensorTest, SliceAliasesRowsOfTheBase) {
  DenseTensor base = DenseTensor::FromVector(Iota(12), DDim({4, 3}));
  DenseTensor rows = base.Slice(1, 3);
  EXPECT_EQ(rows.dims(), DDim({2, 3}));
  EXPECT_EQ(rows.Holder(), base.Holder()) << "a view shares the allocation";
  EXPECT_EQ(rows.offset(), 3 * sizeof(float));
  EXPECT_EQ(rows.data<float>(), base.data<float>() + 3);
  EXPECT_EQ(rows.ToVector<float>(), (std::vector<float>{3, 4, 5, 6, 7, 8}));
  rows.data<float>()[0] = 100.0f;  // write through the view
  EXPECT_EQ(base.ToVector<float>()[3], 100.0f);
  EXPECT_TRUE(rows.IsContiguous());
  EXPECT_EQ(base.Slice(2, 2).numel(), 0);
  EXPECT_THROW(base.Slice(3, 5), phi::OutOfRangeError);
  EXPECT_THROW(base.Slice(2, 1), phi::OutOfRangeError);
}

TEST(DenseTensorTest, FlatViewAliasesAndChecksBounds) {
  DenseTensor base = DenseTensor::FromVector(Iota(10), DDim({2, 5}));
  DenseTensor view = base.FlatView(3, 4);
  EXPECT_EQ(view.dims(), DDim({4}));
  EXPECT_EQ(view.ToVector<float>(), (std::vector<float>{3, 4, 5, 6}));
  view.data<float>()[3] = -1.0f;
  EXPECT_EQ(base.ToVector<float>()[6], -1.0f);
  // A view of a view: offsets add up.
  DenseTensor inner = view.FlatView(1, 2);
  EXPECT_EQ(inner.ToVector<float>(), (std::vector<float>{4, 5}));
  EXPECT_EQ(inner.data<float>(), base.data<float>() + 4);
  EXPECT_THROW(base.FlatView(8, 3), phi::OutOfRangeError);
  EXPECT_THROW(base.FlatView(-1, 2), phi::OutOfRangeError);
}

TEST(DenseTensorTest, AsStridedViewsAreNotContiguousAndCopyGathersThem) {
  // base is 3x4, row-major: element (r, c) = 4r + c.
  DenseTensor base = DenseTensor::FromVector(Iota(12), DDim({3, 4}));
  // The transpose: 4x3 with strides {1, 4}.
  DenseTensor t = base.AsStrided(DDim({4, 3}), {1, 4}, 0);
  EXPECT_FALSE(t.IsContiguous());
  EXPECT_EQ(t.Holder(), base.Holder());
  EXPECT_EQ(t.ToVector<float>(),
            (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  // Column 1 (3 elements, stride 4) starting at element 1.
  DenseTensor col = base.AsStrided(DDim({3}), {4}, 1);
  EXPECT_FALSE(col.IsContiguous());
  DenseTensor gathered;
  phi::Copy(col, phi::CPUPlace(), &gathered);
  EXPECT_TRUE(gathered.IsContiguous());
  EXPECT_NE(gathered.Holder(), base.Holder()) << "Copy gives the destination its own storage";
  EXPECT_EQ(gathered.ToVector<float>(), (std::vector<float>{1, 5, 9}));
  // Writes through a strided view land in the base.
  static_cast<float*>(col.data())[4] = 50.0f;  // element (1, 1) of base
  EXPECT_EQ(base.ToVector<float>()[5], 50.0f);
  // Strides that happen to be row-major are contiguous; size-1 dims ignore their stride.
  EXPECT_TRUE(base.AsStrided(DDim({2, 4}), {4, 1}, 4).IsContiguous());
  EXPECT_TRUE(base.AsStrided(DDim({1, 4}), {99, 1}, 0).IsContiguous());
  EXPECT_FALSE(base.AsStrided(DDim({2, 2}), {4, 1}, 0).IsContiguous());
  // A view reaching past the allocation is refused.
  EXPECT_THROW(base.AsStrided(DDim({4, 4}), {4, 1}, 0), phi::OutOfRangeError);
  EXPECT_THROW(base.AsStrided(DDim({2, 2}), {1}, 0), phi::InvalidArgumentError);
  // Views that need contiguity refuse a strided tensor.
  EXPECT_THROW(t.FlatView(0, 2), phi::InvalidArgumentError);
  EXPECT_THROW(t.Slice(0, 1), phi::InvalidArgumentError);
}

TEST(DenseTensorTest, CopyOfContiguousViewCopiesOnlyItsBytes) {
  DenseTensor base = DenseTensor::FromVector(Iota(8), DDim({4, 2}));
  DenseTensor dst;
  phi::Copy(base.Slice(2, 4), phi::CPUPlace(), &dst);
  EXPECT_EQ(dst.dims(), DDim({2, 2}));
  EXPECT_EQ(dst.ToVector<float>(), (std::vector<float>{4, 5, 6, 7}));
  dst.data<float>()[0] = 42.0f;
  EXPECT_EQ(base.ToVector<float>()[4], 4.0f) << "the copy does not alias its source";
}

TEST(DenseTensorTest, FillResizeAndAllocateLike) {
  DenseTensor t(phi::CPUPlace(), phi::DataType::INT32, DDim({2, 3}));
  phi::Fill(&t, 7);
  EXPECT_EQ(t.ToVector<int32_t>(), std::vector<int32_t>(6, 7));
  const void* p = t.data();
  t.Resize(DDim({3, 2}));
  EXPECT_EQ(t.dims(), DDim({3, 2}));
  EXPECT_EQ(t.data(), p) << "Resize does not move data";
  EXPECT_THROW(t.Resize(DDim({4, 2})), phi::InvalidArgumentError);
  t.AllocateLike(phi::CPUPlace(), phi::DataType::INT32, DDim({6}));
  EXPECT_EQ(t.data(), p) << "same size and dtype: storage kept";
  DenseTensor empty;
  EXPECT_FALSE(empty.initialized());
  EXPECT_THROW(empty.data(), phi::PreconditionNotMetError);
  DenseTensor h(phi::CPUPlace(), phi::DataType::FLOAT16, DDim({4}));
  phi::Fill(&h, 1.5);
  for (auto v : h.ToVector<phi::dtype::float16>()) EXPECT_EQ(static_cast<float>(v), 1.5f);
}

TEST(DDimTest, NumelAndToString) {
  EXPECT_EQ(DDim({2, 3, 4}).numel(), 24);
  EXPECT_EQ(DDim().numel(), 1) << "a 0-d shape has one element";
  EXPECT_EQ(DDim({5, 0}).numel(), 0);
  EXPECT_EQ(DDim({2, 3}).to_str(), "[2, 3]");
  EXPECT_EQ(DDim({2, 3}), phi::make_ddim({2, 3}));
  EXPECT_NE(DDim({2, 3}), DDim({3, 2}));
}

TEST(PlaceTest, CompareAndPrint) {
  EXPECT_TRUE(phi::CPUPlace().is_cpu());
  EXPECT_TRUE(phi::GPUPlace(1).is_gpu());
  EXPECT_EQ(phi::GPUPlace(1).GetDeviceId(), 1);
  EXPECT_NE(phi::GPUPlace(0), phi::GPUPlace(1));
  EXPECT_NE(phi::CPUPlace(), phi::GPUPlace(0));
  EXPECT_TRUE(phi::CPUPlace() < phi::GPUPlace(0));
  EXPECT_FALSE(phi::CPUPlace().DebugString().empty());
  EXPECT_NE(std::hash<phi::Place>()(phi::GPUPlace(0)), std::hash<phi::Place>()(phi::GPUPlace(1)));
}

}  // namespace
