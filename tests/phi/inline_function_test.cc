#include "phi/core/inline_function.h"

#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <string>

namespace phi {
namespace {

using Fn = InlineFunction<int(int), 64>;

TEST(InlineFunction, EmptyIsFalseAndNullptrIsEmpty) {
  Fn f;
  EXPECT_FALSE(f);
  Fn g = nullptr;
  EXPECT_FALSE(g);
  g = [](int x) { return x + 1; };
  EXPECT_TRUE(g);
  EXPECT_EQ(g(41), 42);
}

// Captures that fit stay inside; larger ones go to the heap. Both must call, copy, move and
// destroy what they hold exactly once (the shared_ptr's count tells).
TEST(InlineFunction, SmallAndLargeCapturesCopyMoveAndDestroyTheirState) {
  auto token = std::make_shared<int>(7);
  std::array<char, 200> big{};
  big[199] = 3;
  Fn small = [token](int x) { return x * *token; };
  Fn large = [token, big](int x) { return x + big[199] + *token; };
  EXPECT_EQ(token.use_count(), 3);
  EXPECT_EQ(small(2), 14);
  EXPECT_EQ(large(2), 12);
  {
    Fn small_copy = small;
    Fn large_copy = large;
    EXPECT_EQ(token.use_count(), 5);
    EXPECT_EQ(small_copy(3), 21);
    EXPECT_EQ(large_copy(3), 13);
    Fn moved = std::move(large_copy);
    EXPECT_FALSE(large_copy);  // NOLINT: checking the moved-from state on purpose
    EXPECT_EQ(moved(0), 10);
    EXPECT_EQ(token.use_count(), 5);
    moved = std::move(small_copy);  // the heap callable it held is destroyed
    EXPECT_EQ(token.use_count(), 4);
    EXPECT_EQ(moved(1), 7);
  }
  EXPECT_EQ(token.use_count(), 3);
  small = nullptr;
  large = nullptr;
  EXPECT_EQ(token.use_count(), 1);
}

TEST(InlineFunction, MutableCallableKeepsItsStateBetweenCalls) {
  InlineFunction<std::string(), 64> f = [n = 0]() mutable { return std::to_string(++n); };
  EXPECT_EQ(f(), "1");
  EXPECT_EQ(f(), "2");
  auto g = f;  // the copy continues from the copied state
  EXPECT_EQ(g(), "3");
  EXPECT_EQ(f(), "3");
}

}  // namespace
}  // namespace phi
