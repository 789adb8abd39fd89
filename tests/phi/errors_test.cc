// Typed errors: every factory + macro raises the matching C++ type whose what() has the
// formatted message, the comparison hint and file:line; RethrowWithContext keeps the type.
#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>
#include <string>

#include "phi/core/errors.h"

namespace {

using std::string;

bool Contains(const string& s, const string& part) { return s.find(part) != string::npos; }

// Calls `fn`, expects exactly exception type E, returns its what().
template <typename E>
string CatchAs(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "caught the wrong type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "nothing was thrown";
  return "";
}

#define CHECK_TYPED_ERROR(Name)                                                             \
  TEST(ErrorsTest, Name##CarriesTypeMessageAndLocation) {                                   \
    int line = 0;                                                                           \
    string what = CatchAs<phi::Name##Error>([&] {                                            \
      line = __LINE__;                                                                      \
      PADDLE_THROW(phi::errors::Name("op %s failed with code %d", "allreduce", 7));        \
    });                                                                                     \
    EXPECT_TRUE(Contains(what, #Name "Error: op allreduce failed with code 7")) << what;   \
    EXPECT_TRUE(Contains(what, "errors_test.cc:" + std::to_string(line))) << what;        \
    /* Caught through the base class too, with the right code. */                           \
    try {                                                                                   \
      PADDLE_THROW(phi::errors::Name("plain"));                                            \
    } catch (const phi::EnforceNotMet& e) {                                                 \
      EXPECT_EQ(e.code(), phi::ErrorCode::k##Name);                                         \
      EXPECT_STREQ(phi::ErrorCodeName(e.code()), #Name);                                    \
    }                                                                                       \
    /* PADDLE_ENFORCE_EQ raises the same type with the comparison hint. */                  \
    int a = 3, b = 7;                                                                       \
    what = CatchAs<phi::Name##Error>([&] {                                                   \
      line = __LINE__;                                                                      \
      PADDLE_ENFORCE_EQ(a, b, phi::errors::Name("rank mismatch in group %d", 7));          \
    });                                                                                     \
    EXPECT_TRUE(Contains(what, "rank mismatch in group 7")) << what;                       \
    EXPECT_TRUE(Contains(what, "Expected a == b, but received a:3 vs b:7.")) << what;      \
    EXPECT_TRUE(Contains(what, "errors_test.cc:" + std::to_string(line))) << what;        \
  }
CHECK_TYPED_ERROR(InvalidArgument)
CHECK_TYPED_ERROR(OutOfRange)
CHECK_TYPED_ERROR(PreconditionNotMet)
CHECK_TYPED_ERROR(Unavailable)
CHECK_TYPED_ERROR(Timeout)
CHECK_TYPED_ERROR(External)
CHECK_TYPED_ERROR(Unimplemented)
CHECK_TYPED_ERROR(NotFound)
#undef CHECK_TYPED_ERROR

TEST(ErrorsTest, TypesAreDistinct) {
  // A TimeoutError is not caught as an InvalidArgumentError, and so on.
  bool caught_wrong = false;
  try {
    try {
      PADDLE_THROW(phi::errors::Timeout("late"));
    } catch (const phi::InvalidArgumentError&) {
      caught_wrong = true;
    }
  } catch (const phi::TimeoutError&) {
  }
  EXPECT_FALSE(caught_wrong);
  EXPECT_THROW(PADDLE_THROW(phi::errors::NotFound("k")), std::runtime_error);
}

TEST(ErrorsTest, EveryComparisonMacroPassesAndFails) {
  int one = 1, two = 2;
  EXPECT_NO_THROW(PADDLE_ENFORCE_EQ(one, 1, phi::errors::InvalidArgument("eq")));
  EXPECT_NO_THROW(PADDLE_ENFORCE_NE(one, two, phi::errors::InvalidArgument("ne")));
  EXPECT_NO_THROW(PADDLE_ENFORCE_GT(two, one, phi::errors::InvalidArgument("gt")));
  EXPECT_NO_THROW(PADDLE_ENFORCE_GE(two, two, phi::errors::InvalidArgument("ge")));
  EXPECT_NO_THROW(PADDLE_ENFORCE_LT(one, two, phi::errors::InvalidArgument("lt")));
  EXPECT_NO_THROW(PADDLE_ENFORCE_LE(one, one, phi::errors::InvalidArgument("le")));
  EXPECT_NO_THROW(PADDLE_ENFORCE(one < two, phi::errors::InvalidArgument("cond")));
  EXPECT_TRUE(Contains(CatchAs<phi::InvalidArgumentError>([&] {
                         PADDLE_ENFORCE_NE(one, one, phi::errors::InvalidArgument("ne"));
                       }),
                       "Expected one != one, but received one:1 vs one:1."));
  EXPECT_TRUE(Contains(CatchAs<phi::OutOfRangeError>([&] {
                         PADDLE_ENFORCE_GT(one, two, phi::errors::OutOfRange("gt"));
                       }),
                       "Expected one > two"));
  EXPECT_TRUE(Contains(CatchAs<phi::OutOfRangeError>([&] {
                         PADDLE_ENFORCE_GE(one, two, phi::errors::OutOfRange("ge"));
                       }),
                       "Expected one >= two"));
  EXPECT_TRUE(Contains(CatchAs<phi::OutOfRangeError>([&] {
                         PADDLE_ENFORCE_LT(two, one, phi::errors::OutOfRange("lt"));
                       }),
                       "Expected two < one"));
  EXPECT_TRUE(Contains(CatchAs<phi::OutOfRangeError>([&] {
                         PADDLE_ENFORCE_LE(two, one, phi::errors::OutOfRange("le"));
                       }),
                       "Expected two <= one"));
  string what = CatchAs<phi::PreconditionNotMetError>([&] {
    PADDLE_ENFORCE(one > two, phi::errors::PreconditionNotMet("need %s", "order"));
  });
  EXPECT_TRUE(Contains(what, "need order")) << what;
  EXPECT_TRUE(Contains(what, "Expected one > two, but it is false.")) << what;
  int* null = nullptr;
  EXPECT_THROW(PADDLE_ENFORCE_NOT_NULL(null, phi::errors::NotFound("no pointer")),
               phi::NotFoundError);
}

TEST(ErrorsTest, EnforceEvaluatesEachOperandOnce) {
  int calls = 0;
  auto next = [&] { return ++calls; };
  EXPECT_THROW(PADDLE_ENFORCE_EQ(next(), 5, phi::errors::InvalidArgument("x")),
               phi::InvalidArgumentError);
  EXPECT_EQ(calls, 1);
}

TEST(ErrorsTest, MessagesWithoutArgumentsAndStrings) {
  EXPECT_TRUE(Contains(CatchAs<phi::UnavailableError>(
                           [] { PADDLE_THROW(phi::errors::Unavailable("no args")); }),
                       "UnavailableError: no args"));
  string dynamic = "built at run time: 100%";
  EXPECT_TRUE(Contains(CatchAs<phi::UnavailableError>(
                           [&] { PADDLE_THROW(phi::errors::Unavailable(dynamic)); }),
                       "built at run time: 100%"))
      << "a std::string message is taken verbatim, not as a format";
  string long_arg(5000, 'x');
  EXPECT_TRUE(Contains(CatchAs<phi::ExternalError>([&] {
                         PADDLE_THROW(phi::errors::External("%s!", long_arg.c_str()));
                       }),
                       long_arg + "!"));
}

TEST(ErrorsTest, RethrowWithContextKeepsTheTypeAndAddsContext) {
  std::exception_ptr timeout;
  try {
    PADDLE_THROW(phi::errors::Timeout("allreduce did not finish in %d ms", 100));
  } catch (...) {
    timeout = std::current_exception();
  }
  string what = CatchAs<phi::TimeoutError>(
      [&] { phi::RethrowWithContext(timeout, "group 3, seq 12, ALLREDUCE"); });
  EXPECT_TRUE(Contains(what, "group 3, seq 12, ALLREDUCE")) << what;
  EXPECT_TRUE(Contains(what, "allreduce did not finish in 100 ms")) << what;
  EXPECT_LT(what.find("group 3"), what.find("allreduce did not")) << "context comes first";

  for (auto code : {phi::ErrorCode::kInvalidArgument, phi::ErrorCode::kUnavailable,
                    phi::ErrorCode::kNotFound}) {
    std::exception_ptr p;
    try {
      PADDLE_THROW((phi::ErrorSummary{code, "inner"}));
    } catch (...) {
      p = std::current_exception();
    }
    try {
      phi::RethrowWithContext(p, "ctx");
    } catch (const phi::EnforceNotMet& e) {
      EXPECT_EQ(e.code(), code);
      EXPECT_TRUE(Contains(e.what(), "ctx")) << e.what();
    }
  }

  // A foreign exception becomes ExternalError with the context and its message.
  std::exception_ptr foreign = std::make_exception_ptr(std::runtime_error("socket closed"));
  what = CatchAs<phi::ExternalError>([&] { phi::RethrowWithContext(foreign, "recv from 2"); });
  EXPECT_TRUE(Contains(what, "recv from 2")) << what;
  EXPECT_TRUE(Contains(what, "socket closed")) << what;
  std::exception_ptr unknown = std::make_exception_ptr(42);
  what = CatchAs<phi::ExternalError>([&] { phi::RethrowWithContext(unknown, "odd"); });
  EXPECT_TRUE(Contains(what, "odd")) << what;
}

}  // namespace
