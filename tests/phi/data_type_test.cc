// Data types: size and name of every dtype, the classification helpers, dispatch, and
// float16 / bfloat16 conversions (values, rounding, bit patterns).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <iterator>
#include <set>
#include <sstream>
#include <string>

#include "phi/core/data_type.h"
#include "phi/core/errors.h"

namespace {

using phi::DataType;
using phi::dtype::bfloat16;
using phi::dtype::float16;

struct DTypeRow {
  DataType type;
  size_t size;
  const char* name;
  bool integral, floating, complex;
  DataType real;
};

const DTypeRow kTable[] = {
    {DataType::BOOL, 1, "bool", true, false, false, DataType::BOOL},
    {DataType::INT8, 1, "int8", true, false, false, DataType::INT8},
    {DataType::UINT8, 1, "uint8", true, false, false, DataType::UINT8},
    {DataType::INT32, 4, "int32", true, false, false, DataType::INT32},
    {DataType::INT64, 8, "int64", true, false, false, DataType::INT64},
    {DataType::FLOAT16, 2, "float16", false, true, false, DataType::FLOAT16},
    {DataType::BFLOAT16, 2, "bfloat16", false, true, false, DataType::BFLOAT16},
    {DataType::FLOAT32, 4, "float32", false, true, false, DataType::FLOAT32},
    {DataType::FLOAT64, 8, "float64", false, true, false, DataType::FLOAT64},
    {DataType::COMPLEX64, 8, "complex64", false, false, true, DataType::FLOAT32},
    {DataType::COMPLEX128, 16, "complex128", false, false, true, DataType::FLOAT64},
};

TEST(DataTypeTest, EveryDTypeHasItsSizeNameAndClass) {
  ASSERT_EQ(std::size(phi::kAllDataTypes), std::size(kTable)) << "a dtype is missing a row";
  std::set<std::string> names;
  for (size_t i = 0; i < std::size(kTable); ++i) {
    const DTypeRow& row = kTable[i];
    SCOPED_TRACE(row.name);
    EXPECT_EQ(phi::kAllDataTypes[i], row.type);
    EXPECT_EQ(phi::SizeOf(row.type), row.size);
    EXPECT_STREQ(phi::DataTypeToString(row.type), row.name);
    std::ostringstream os;
    os << row.type;
    EXPECT_EQ(os.str(), row.name);
    EXPECT_EQ(phi::IsIntegral(row.type), row.integral);
    EXPECT_EQ(phi::IsFloating(row.type), row.floating);
    EXPECT_EQ(phi::IsComplex(row.type), row.complex);
    EXPECT_EQ(phi::ToRealType(row.type), row.real);
    // Dispatch agrees with the C++ type.
    size_t visited = phi::VisitDataType(row.type, [](auto tag) {
      using T = typename decltype(tag)::type;
      EXPECT_EQ(phi::CppTypeToDataType<T>::Type(), phi::VisitDataType(
          phi::CppTypeToDataType<T>::Type(), [](auto t2) {
            return phi::CppTypeToDataType<typename decltype(t2)::type>::Type();
          }));
      return sizeof(T);
    });
    EXPECT_EQ(visited, row.size);
    names.insert(row.name);
  }
  EXPECT_EQ(names.size(), std::size(kTable));
}

TEST(DataTypeTest, UndefinedIsRefusedWithAClearError) {
  EXPECT_STREQ(phi::DataTypeToString(DataType::UNDEFINED), "undefined");
  try {
    phi::SizeOf(DataType::UNDEFINED);
    FAIL() << "SizeOf(UNDEFINED) returned";
  } catch (const phi::InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("undefined"), std::string::npos) << e.what();
  }
}

uint16_t Bits(float16 h) {
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
uint16_t Bits(bfloat16 h) {
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

TEST(Float16Test, KnownValuesRoundTrip) {
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 0.333251953125f, -0.0009765625f,
                  6.103515625e-05f /* smallest normal */, 5.960464477539063e-08f}) {
    EXPECT_EQ(static_cast<float>(float16(v)), v) << v;
  }
  EXPECT_EQ(Bits(float16(1.0f)), 0x3C00);
  EXPECT_EQ(Bits(float16(-2.5f)), 0xC100);
  EXPECT_EQ(Bits(float16(65504.0f)), 0x7BFF);
  EXPECT_EQ(Bits(float16(0.0f)), 0x0000);
  EXPECT_EQ(Bits(float16(-0.0f)), 0x8000);
  EXPECT_EQ(Bits(float16(std::numeric_limits<float>::infinity())), 0x7C00);
  EXPECT_TRUE(std::isinf(static_cast<float>(float16(std::numeric_limits<float>::infinity()))));
  EXPECT_TRUE(std::isnan(static_cast<float>(float16(std::nanf("")))));
  EXPECT_EQ(Bits(float16(65520.0f)), 0x7C00) << "past the largest half rounds to inf";
  // 1/3 is not representable: nearest half is 0.333251953125 (0x3555).
  EXPECT_EQ(static_cast<float>(float16(1.0f / 3.0f)), 0.333251953125f);
  EXPECT_EQ(Bits(float16(1.0f / 3.0f)), 0x3555);
}

TEST(Float16Test, RoundsToNearestEven) {
  // The half spacing at 1 is 2^-10: 1 + 2^-11 is a tie, it rounds to even (1.0).
  EXPECT_EQ(static_cast<float>(float16(1.0f + std::ldexp(1.0f, -11))), 1.0f);
  // 1 + 3*2^-11 is a tie between 1+2^-10 (odd) and 1+2^-9 (even): rounds up.
  EXPECT_EQ(static_cast<float>(float16(1.0f + 3 * std::ldexp(1.0f, -11))),
            1.0f + std::ldexp(1.0f, -9));
  // Just above the tie rounds up.
  EXPECT_EQ(static_cast<float>(float16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20))),
            1.0f + std::ldexp(1.0f, -10));
  // Arithmetic is in half precision.
  float16 a(1.5f), b(2.25f);
  EXPECT_EQ(static_cast<float>(a + b), 3.75f);
  EXPECT_EQ(static_cast<float>(a * b), 3.375f);
}

TEST(BFloat16Test, KnownValuesRoundTrip) {
  for (float v : {0.0f, 1.0f, -2.5f, 0.333984375f, 3.3895313892515355e38f /* max */}) {
    EXPECT_EQ(static_cast<float>(bfloat16(v)), v) << v;
  }
  EXPECT_EQ(Bits(bfloat16(1.0f)), 0x3F80);
  EXPECT_EQ(Bits(bfloat16(-2.5f)), 0xC020);
  // 1/3 rounds to 0.333984375 (0x3EAB), not truncated to 0.33203125 (0x3EAA).
  EXPECT_EQ(static_cast<float>(bfloat16(1.0f / 3.0f)), 0.333984375f);
  EXPECT_EQ(Bits(bfloat16(1.0f / 3.0f)), 0x3EAB);
  EXPECT_EQ(Bits(bfloat16(std::numeric_limits<float>::infinity())), 0x7F80);
  EXPECT_TRUE(std::isinf(static_cast<float>(bfloat16(-std::numeric_limits<float>::infinity()))));
  EXPECT_TRUE(std::isnan(static_cast<float>(bfloat16(std::nanf("")))));
  // bfloat16 keeps float's range: 1e30 stays finite, 65504 is exact.
  EXPECT_FALSE(std::isinf(static_cast<float>(bfloat16(1e30f))));
  EXPECT_EQ(static_cast<float>(bfloat16(65504.0f)), 65536.0f) << "8 significant bits";
}

TEST(BFloat16Test, RoundsToNearestEven) {
  // bf16 spacing at 1 is 2^-7: 1 + 2^-8 is a tie, rounds to even (1.0).
  EXPECT_EQ(static_cast<float>(bfloat16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_EQ(static_cast<float>(bfloat16(1.0f + 3 * std::ldexp(1.0f, -8))),
            1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(static_cast<float>(bfloat16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20))),
            1.0f + std::ldexp(1.0f, -7));
  // Fp16's tie 1 + 2^-11 is far below bf16's resolution.
  EXPECT_EQ(static_cast<float>(bfloat16(1.0f + std::ldexp(1.0f, -11))), 1.0f);
}

}  // namespace
