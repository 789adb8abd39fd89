// The NCCL dtype/reduction mapping and the device query: no device needed, always runs.
#include <gtest/gtest.h>

#include <cstring>

#include "phi/core/device_info.h"
#include "phi/core/distributed/nccl_tools_internal.h"
#include "phi/core/errors.h"

namespace {

using phi::DataType;
using phi::distributed::NCCLReducePlan;
using phi::distributed::PlanNCCLReduction;
using phi::distributed::Reduction;
using phi::distributed::ReduceOp;
using phi::distributed::ToNCCLBuffer;
using phi::distributed::ToNCCLDataType;

Reduction Red(ReduceOp op, double factor = 1.0) { return Reduction{op, factor}; }

TEST(NCCLMapping, DataTypes) {
  EXPECT_EQ(ToNCCLDataType(DataType::BOOL), ncclUint8);
  EXPECT_EQ(ToNCCLDataType(DataType::INT8), ncclInt8);
  EXPECT_EQ(ToNCCLDataType(DataType::UINT8), ncclUint8);
  EXPECT_EQ(ToNCCLDataType(DataType::INT32), ncclInt32);
  EXPECT_EQ(ToNCCLDataType(DataType::INT64), ncclInt64);
  EXPECT_EQ(ToNCCLDataType(DataType::FLOAT16), ncclFloat16);
  EXPECT_EQ(ToNCCLDataType(DataType::BFLOAT16), ncclBfloat16);
  EXPECT_EQ(ToNCCLDataType(DataType::FLOAT32), ncclFloat32);
  EXPECT_EQ(ToNCCLDataType(DataType::FLOAT64), ncclFloat64);
  EXPECT_EQ(ToNCCLDataType(DataType::COMPLEX64), ncclFloat32);
  EXPECT_EQ(ToNCCLDataType(DataType::COMPLEX128), ncclFloat64);
  EXPECT_THROW(ToNCCLDataType(DataType::UNDEFINED), phi::InvalidArgumentError);
}

TEST(NCCLMapping, ElementSizesAgree) {
  // NCCL's element size times the count must be the tensor's bytes for every dtype.
  auto nccl_size = [](ncclDataType_t t) -> size_t {
    switch (t) {
      case ncclInt8: case ncclUint8: return 1;
      case ncclFloat16: case ncclBfloat16: return 2;
      case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
      default: return 8;
    }
  };
  for (DataType dt : phi::kAllDataTypes) {
    auto b = ToNCCLBuffer(dt, 10);
    EXPECT_EQ(b.count * nccl_size(b.dtype), 10 * phi::SizeOf(dt)) << phi::DataTypeToString(dt);
  }
  EXPECT_EQ(ToNCCLBuffer(DataType::COMPLEX64, 3).count, 6u);
  EXPECT_EQ(ToNCCLBuffer(DataType::FLOAT32, 0).count, 0u);
}

TEST(NCCLMapping, ReduceOps) {
  EXPECT_EQ(PlanNCCLReduction(DataType::FLOAT32, 4, Red(ReduceOp::SUM)).op, ncclSum);
  EXPECT_EQ(PlanNCCLReduction(DataType::FLOAT32, 4, Red(ReduceOp::AVG)).op, ncclAvg);
  EXPECT_EQ(PlanNCCLReduction(DataType::INT64, 4, Red(ReduceOp::AVG)).op, ncclAvg);
  EXPECT_EQ(PlanNCCLReduction(DataType::INT32, 4, Red(ReduceOp::PRODUCT)).op, ncclProd);
  EXPECT_EQ(PlanNCCLReduction(DataType::FLOAT16, 4, Red(ReduceOp::MIN)).op, ncclMin);
  EXPECT_EQ(PlanNCCLReduction(DataType::BFLOAT16, 4, Red(ReduceOp::MAX)).op, ncclMax);
  EXPECT_FALSE(PlanNCCLReduction(DataType::FLOAT32, 4, Red(ReduceOp::SUM)).premul);
}

TEST(NCCLMapping, BoolUsesUint8WithLogicalOps) {
  auto plan = [](ReduceOp op) { return PlanNCCLReduction(DataType::BOOL, 5, Red(op)); };
  EXPECT_EQ(plan(ReduceOp::SUM).buffer.dtype, ncclUint8);
  EXPECT_EQ(plan(ReduceOp::SUM).op, ncclMax);      // any
  EXPECT_EQ(plan(ReduceOp::PRODUCT).op, ncclMin);  // all
  EXPECT_EQ(plan(ReduceOp::MIN).op, ncclMin);
  EXPECT_EQ(plan(ReduceOp::MAX).op, ncclMax);
  EXPECT_EQ(plan(ReduceOp::BAND).op, ncclMin);
  EXPECT_EQ(plan(ReduceOp::BOR).op, ncclMax);
  EXPECT_THROW(plan(ReduceOp::BXOR), phi::UnimplementedError);
  EXPECT_THROW(plan(ReduceOp::AVG), phi::InvalidArgumentError);
}

TEST(NCCLMapping, ComplexThroughRealTypeWithTwiceTheCount) {
  for (ReduceOp op : {ReduceOp::SUM, ReduceOp::AVG, ReduceOp::PREMUL_SUM}) {
    auto p = PlanNCCLReduction(DataType::COMPLEX128, 7, Red(op, 0.5));
    EXPECT_EQ(p.buffer.dtype, ncclFloat64);
    EXPECT_EQ(p.buffer.count, 14u);
  }
  EXPECT_EQ(PlanNCCLReduction(DataType::COMPLEX64, 7, Red(ReduceOp::SUM)).buffer.dtype,
            ncclFloat32);
  EXPECT_THROW(PlanNCCLReduction(DataType::COMPLEX64, 7, Red(ReduceOp::MAX)),
               phi::InvalidArgumentError);
}

TEST(NCCLMapping, BitwiseOpsAreUnimplemented) {
  for (DataType dt : {DataType::INT8, DataType::UINT8, DataType::INT32, DataType::INT64}) {
    for (ReduceOp op : {ReduceOp::BAND, ReduceOp::BOR, ReduceOp::BXOR}) {
      try {
        PlanNCCLReduction(dt, 4, Red(op));
        ADD_FAILURE() << "expected UnimplementedError for " << phi::distributed::ReduceOpToString(op);
      } catch (const phi::UnimplementedError& e) {
        EXPECT_NE(std::string(e.what()).find("NCCL has no bitwise"), std::string::npos)
            << e.what();
      }
    }
  }
  // Bitwise ops on floating types are invalid everywhere, not merely unimplemented here.
  EXPECT_THROW(PlanNCCLReduction(DataType::FLOAT32, 4, Red(ReduceOp::BAND)),
               phi::InvalidArgumentError);
}

TEST(NCCLMapping, PremulScalarIsEncodedAsTheElementType) {
  auto f32 = PlanNCCLReduction(DataType::FLOAT32, 4, Red(ReduceOp::PREMUL_SUM, 0.25));
  ASSERT_TRUE(f32.premul);
  float f;
  std::memcpy(&f, f32.scalar.data(), sizeof(f));
  EXPECT_EQ(f, 0.25f);

  auto f16 = PlanNCCLReduction(DataType::FLOAT16, 4, Red(ReduceOp::PREMUL_SUM, 0.5));
  phi::dtype::float16 h;
  std::memcpy(&h, f16.scalar.data(), sizeof(h));
  EXPECT_EQ(static_cast<float>(h), 0.5f);

  auto bf16 = PlanNCCLReduction(DataType::BFLOAT16, 4, Red(ReduceOp::PREMUL_SUM, 2.0));
  phi::dtype::bfloat16 b;
  std::memcpy(&b, bf16.scalar.data(), sizeof(b));
  EXPECT_EQ(static_cast<float>(b), 2.0f);

  auto c128 = PlanNCCLReduction(DataType::COMPLEX128, 4, Red(ReduceOp::PREMUL_SUM, 1.5));
  double d;
  std::memcpy(&d, c128.scalar.data(), sizeof(d));
  EXPECT_EQ(d, 1.5);

  auto i32 = PlanNCCLReduction(DataType::INT32, 4, Red(ReduceOp::PREMUL_SUM, 3.0));
  int32_t i;
  std::memcpy(&i, i32.scalar.data(), sizeof(i));
  EXPECT_EQ(i, 3);
  // NCCL would truncate a fractional factor before multiplying; the CPU engine truncates
  // each product. Refused rather than answered differently.
  EXPECT_THROW(PlanNCCLReduction(DataType::INT32, 4, Red(ReduceOp::PREMUL_SUM, 0.5)),
               phi::UnimplementedError);
}

TEST(NCCLMapping, ErrorsCarryVersionAndText) {
  EXPECT_NO_THROW(phi::distributed::CheckNCCL(ncclSuccess, "x", nullptr));
  try {
    phi::distributed::CheckNCCL(ncclInvalidArgument, "ncclAllReduce", nullptr, "ctx");
    FAIL() << "no throw";
  } catch (const phi::ExternalError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("ncclAllReduce"), std::string::npos) << msg;
    EXPECT_NE(msg.find(ncclGetErrorString(ncclInvalidArgument)), std::string::npos) << msg;
    EXPECT_NE(msg.find("NCCL " + phi::distributed::NCCLVersionString()), std::string::npos)
        << msg;
  }
  EXPECT_THROW(phi::distributed::CheckNCCL(ncclRemoteError, "ncclRecv", nullptr),
               phi::UnavailableError);
  EXPECT_EQ(phi::distributed::NCCLVersionString().rfind("2.", 0), 0u)
      << phi::distributed::NCCLVersionString();
}

TEST(DeviceInfo, CountAndReasonAgree) {
  EXPECT_TRUE(phi::IsCompiledWithCuda());
  const int n = phi::GetGPUDeviceCount();
  EXPECT_GE(n, 0);
  EXPECT_EQ(n == 0, !phi::GPUUnavailableReason().empty()) << phi::GPUUnavailableReason();
  if (n == 0) std::cout << "no CUDA device: " << phi::GPUUnavailableReason() << std::endl;
}

}  // namespace
